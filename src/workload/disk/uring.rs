//! The `uring` engine: io_uring with up to `--queue-depth` requests in flight, as
//! fio's io_uring engine without registered files or buffers.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};

use super::buffer::AlignedBuf;
use super::engine::{Chunk, Engine, ReadJob, WriteJob, read_chunks, sync_file, write_chunks};
use super::sync::short_file;
use crate::workload::{Error, Progress};

/// io_uring reads and writes, `queue_depth` at a time.
pub struct UringEngine {
    ring: IoUring,
    block_size: usize,
    queue_depth: usize,
    read_bufs: Vec<AlignedBuf>,
}

impl UringEngine {
    /// A ring for `queue_depth` requests of `block_size` bytes.
    pub fn new(block_size: usize, queue_depth: u32) -> Result<UringEngine, Error> {
        let ring = IoUring::new(queue_depth).map_err(|e| {
            Error::Unsupported(format!(
                "cannot set up io_uring with {queue_depth} entries: {e} (use --engine sync)"
            ))
        })?;
        Ok(UringEngine {
            ring,
            block_size,
            queue_depth: queue_depth as usize,
            read_bufs: (0..queue_depth)
                .map(|_| AlignedBuf::new(block_size))
                .collect(),
        })
    }
}

/// What a request does for one slot: the part that differs between reads and writes.
trait Requests {
    /// The request for `chunk` of slot `slot`, `done` bytes of it already moved.
    fn entry(&mut self, slot: usize, chunk: &Chunk, done: usize) -> squeue::Entry;
    /// Slot `slot` is finished with its chunk (its buffer may be reused).
    fn finished(&mut self, slot: usize);
    /// Whether a short result ends the chunk (direct reads at the end of the file).
    fn short_is_final(&self) -> bool;
}

struct Writes<'a> {
    job: &'a WriteJob<'a>,
    bufs: Vec<Option<AlignedBuf>>,
}

impl Requests for Writes<'_> {
    fn entry(&mut self, slot: usize, chunk: &Chunk, done: usize) -> squeue::Entry {
        let buf = self.bufs[slot].get_or_insert_with(|| self.job.data.next());
        let file = match (chunk.tail, self.job.tail_file) {
            (true, Some(tail)) => tail,
            _ => self.job.file,
        };
        let bytes = &buf.as_slice()[done..chunk.len];
        opcode::Write::new(
            types::Fd(file.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .offset(chunk.offset + done as u64)
        .build()
    }

    fn finished(&mut self, slot: usize) {
        if let Some(buf) = self.bufs[slot].take() {
            self.job.data.recycle(buf);
        }
    }

    fn short_is_final(&self) -> bool {
        false
    }
}

struct Reads<'a> {
    job: &'a ReadJob<'a>,
    bufs: &'a mut [AlignedBuf],
}

impl Requests for Reads<'_> {
    fn entry(&mut self, slot: usize, chunk: &Chunk, done: usize) -> squeue::Entry {
        let len = if self.job.direct {
            chunk.len
        } else {
            chunk.expect - done
        };
        let bytes = &mut self.bufs[slot].as_mut_slice()[done..done + len];
        opcode::Read::new(
            types::Fd(self.job.file.as_raw_fd()),
            bytes.as_mut_ptr(),
            len as u32,
        )
        .offset(chunk.offset + done as u64)
        .build()
    }

    fn finished(&mut self, _slot: usize) {}

    fn short_is_final(&self) -> bool {
        self.job.direct
    }
}

/// Where a drive reports, and what it checks between requests.
struct Drive<'a> {
    progress: &'a Progress,
    cancel: &'a crate::run::Cancel,
    path: &'a std::path::Path,
    op: &'static str,
}

impl UringEngine {
    /// Keeps up to `queue_depth` chunks in flight until all are done. On an error or a
    /// cancel it stops submitting but waits for every request in flight, because the
    /// kernel may still be using their buffers.
    fn drive(
        &mut self,
        chunks: &[Chunk],
        requests: &mut dyn Requests,
        drive: Drive,
    ) -> Result<(), Error> {
        let mut free: Vec<usize> = (0..self.queue_depth).rev().collect();
        let mut slots: Vec<(Chunk, usize)> = vec![(chunks[0], 0); self.queue_depth];
        let mut next = 0;
        let mut in_flight = 0;
        let mut failure: Option<Error> = None;
        let mut done_list = Vec::with_capacity(self.queue_depth);
        loop {
            while failure.is_none() && next < chunks.len() && !free.is_empty() {
                if drive.cancel.is_set() {
                    failure = Some(Error::Interrupted);
                    break;
                }
                let slot = free.pop().expect("a free slot");
                slots[slot] = (chunks[next], 0);
                next += 1;
                self.push(
                    requests
                        .entry(slot, &slots[slot].0, 0)
                        .user_data(slot as u64),
                );
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(Error::io(drive.op, drive.path, e)),
            }
            done_list.clear();
            done_list.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data() as usize, cqe.result())),
            );
            for &(slot, result) in &done_list {
                let (chunk, done) = slots[slot];
                let outcome = if result < 0 {
                    Some(Err(Error::io(
                        drive.op,
                        drive.path,
                        std::io::Error::from_raw_os_error(-result),
                    )))
                } else if result == 0 && done < chunk.expect {
                    Some(Err(self::short(
                        drive.op,
                        drive.path,
                        chunk.offset + done as u64,
                    )))
                } else {
                    let done = done + result as usize;
                    if done >= chunk.expect {
                        drive.progress.add(chunk.expect as u64);
                        Some(Ok(()))
                    } else if requests.short_is_final() || failure.is_some() {
                        Some(Err(self::short(
                            drive.op,
                            drive.path,
                            chunk.offset + done as u64,
                        )))
                    } else {
                        slots[slot].1 = done;
                        self.push(requests.entry(slot, &chunk, done).user_data(slot as u64));
                        None
                    }
                };
                if let Some(outcome) = outcome {
                    requests.finished(slot);
                    free.push(slot);
                    in_flight -= 1;
                    if let Err(e) = outcome {
                        failure.get_or_insert(e);
                    }
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    fn push(&mut self, entry: squeue::Entry) {
        // SAFETY: every buffer an entry points to stays alive and untouched until its
        // completion is reaped in `drive`, which never returns with requests in flight.
        // The queue has room: at most `queue_depth` entries are ever pending.
        unsafe { self.ring.submission().push(&entry) }.expect("the submission queue has room");
    }
}

fn short(op: &'static str, path: &std::path::Path, at: u64) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("short {op} at byte {at}"),
        ),
    )
}

impl Engine for UringEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Duration, Error> {
        let chunks = write_chunks(job.size, self.block_size, job.direct);
        let mut writes = Writes {
            job,
            bufs: (0..self.queue_depth).map(|_| None).collect(),
        };
        let drive = Drive {
            progress: job.progress,
            cancel: job.cancel,
            path: job.path,
            op: "write",
        };
        let start = Instant::now();
        self.drive(&chunks, &mut writes, drive)?;
        sync_file(job)?;
        Ok(start.elapsed())
    }

    fn read(&mut self, job: &ReadJob) -> Result<Duration, Error> {
        let chunks = read_chunks(job.size, self.block_size, job.direct);
        let mut bufs = std::mem::take(&mut self.read_bufs);
        let mut reads = Reads {
            job,
            bufs: &mut bufs,
        };
        let drive = Drive {
            progress: job.progress,
            cancel: job.cancel,
            path: job.path,
            op: "read",
        };
        let start = Instant::now();
        let result = self.drive(&chunks, &mut reads, drive);
        let elapsed = start.elapsed();
        self.read_bufs = bufs;
        result.map(|()| elapsed).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                short_file(job, job.size)
            }
            other => other,
        })
    }
}
