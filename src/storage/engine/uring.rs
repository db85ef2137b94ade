//! The `uring` engine: io_uring with up to `--queue-depth` requests in flight, as
//! fio's io_uring engine without registered files or buffers.

use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use io_uring::{IoUring, opcode, squeue, types};

use super::{Chunk, Engine, ReadJob, Transfer, WriteJob, buffers_error, short_file, sync_file};
use crate::control::{Cancel, Progress};
use crate::error::Error;
use crate::storage::buffer::AlignedBuf;
use crate::storage::data::Pattern;
use crate::storage::ring::one_thread_ring;

/// io_uring reads and writes, `queue_depth` at a time.
pub struct UringEngine {
    ring: Ring,
    block_size: usize,
    data: ManuallyDrop<Pattern>,
    read_bufs: ManuallyDrop<Vec<AlignedBuf>>,
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        if !self.ring.poisoned {
            // SAFETY: dropped once, here; no request of this ring is in flight.
            unsafe {
                ManuallyDrop::drop(&mut self.data);
                ManuallyDrop::drop(&mut self.read_bufs);
            }
        }
    }
}

impl UringEngine {
    /// A ring for `queue_depth` requests of `block_size` bytes, writing data seeded
    /// with `seed`.
    pub fn new(block_size: usize, queue_depth: u32, seed: u64) -> Result<UringEngine, Error> {
        let ring = one_thread_ring(queue_depth).map_err(|e| {
            Error::Unsupported(format!(
                "cannot set up io_uring with {queue_depth} entries: {e} (use --engine sync)"
            ))
        })?;
        let slots = queue_depth as usize;
        Ok(UringEngine {
            ring: Ring {
                ring,
                slots,
                poisoned: false,
            },
            block_size,
            data: ManuallyDrop::new(Pattern::new(slots, block_size, seed).map_err(buffers_error)?),
            read_bufs: ManuallyDrop::new(
                (0..slots)
                    .map(|_| AlignedBuf::new(block_size))
                    .collect::<std::io::Result<_>>()
                    .map_err(buffers_error)?,
            ),
        })
    }
}

impl Engine for UringEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Transfer, Error> {
        let chunks = job.chunks(self.block_size);
        let mut writes = Writes {
            job,
            data: &mut self.data,
            blocks: vec![std::ptr::null(); self.ring.slots],
        };
        let start = Instant::now();
        let bytes = self
            .ring
            .drive(chunks, &mut writes, job.progress, job.cancel, job.path)?;
        sync_file(job)?;
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes,
        })
    }

    fn read(&mut self, job: &ReadJob) -> Result<Transfer, Error> {
        let chunks = job.chunks(self.block_size);
        let mut reads = Reads {
            job,
            bufs: &mut self.read_bufs,
        };
        let start = Instant::now();
        let bytes = self
            .ring
            .drive(chunks, &mut reads, job.progress, job.cancel, job.path)?;
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes,
        })
    }
}

/// What a request does for one slot: the part that differs between reads and writes.
trait Requests {
    /// `"read"` or `"write"`, for messages.
    fn op(&self) -> &'static str;
    /// The request for `chunk` in slot `slot`, `done` bytes of it already moved.
    fn entry(&mut self, slot: usize, chunk: &Chunk, done: usize) -> squeue::Entry;
    /// Whether a short result ends the chunk (direct reads stop at the end of the file).
    fn short_is_final(&self) -> bool;
}

struct Writes<'a> {
    job: &'a WriteJob<'a>,
    data: &'a mut Pattern,
    /// Each slot's block, made when its chunk starts and kept for partial writes.
    blocks: Vec<*const u8>,
}

impl Requests for Writes<'_> {
    fn op(&self) -> &'static str {
        "write"
    }

    fn entry(&mut self, slot: usize, chunk: &Chunk, done: usize) -> squeue::Entry {
        if done == 0 {
            self.blocks[slot] = self.data.block(slot, chunk.len).as_ptr();
        }
        let file = match (chunk.tail, self.job.tail_file) {
            (true, Some(tail)) => tail,
            _ => self.job.file,
        };
        // SAFETY: the block has chunk.len bytes and done < chunk.len.
        let bytes = unsafe { self.blocks[slot].add(done) };
        opcode::Write::new(
            types::Fd(file.as_raw_fd()),
            bytes,
            (chunk.len - done) as u32,
        )
        .offset(chunk.offset + done as u64)
        .build()
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
    fn op(&self) -> &'static str {
        "read"
    }

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

    fn short_is_final(&self) -> bool {
        self.job.direct
    }
}

/// The ring and its slots: one request in flight per slot.
struct Ring {
    ring: IoUring,
    slots: usize,
    /// Set when the ring stopped answering with requests in flight: their buffers may
    /// still be written by the kernel, so they must never be freed.
    poisoned: bool,
}

/// What a completion means for its chunk.
enum Reaped {
    /// The chunk is all moved.
    Whole,
    /// Part of it is: this many bytes, the rest still to ask for.
    Partial(usize),
    /// It ended this many bytes in, short of what was expected.
    Short(usize),
    /// The request failed with this errno.
    Failed(i32),
}

impl Reaped {
    /// The completion `result` of `chunk`, `done` bytes of which had moved before it;
    /// `short_ends` when a short transfer is the end (at a file's end, after a failure).
    fn of(chunk: &Chunk, done: usize, result: i32, short_ends: bool) -> Reaped {
        if result < 0 {
            return Reaped::Failed(-result);
        }
        let done = done + result as usize;
        if done >= chunk.expect {
            Reaped::Whole
        } else if result == 0 || short_ends {
            Reaped::Short(done)
        } else {
            Reaped::Partial(done)
        }
    }
}

impl Ring {
    /// Keeps up to one chunk per slot in flight until all are done; returns the bytes
    /// moved. On an error or a cancel it stops submitting but waits for every request in
    /// flight, because the kernel may still be using their buffers.
    fn drive(
        &mut self,
        chunks: impl Iterator<Item = Chunk>,
        requests: &mut dyn Requests,
        progress: &Progress,
        cancel: &Cancel,
        path: &Path,
    ) -> Result<u64, Error> {
        let op = requests.op();
        let mut free: Vec<usize> = (0..self.slots).rev().collect();
        let mut slots: Vec<Option<(Chunk, usize)>> = vec![None; self.slots];
        let mut chunks = chunks.peekable();
        let mut in_flight = 0;
        let mut failed_waits = 0;
        let mut moved = 0;
        let mut failure: Option<Error> = None;
        let mut completed = Vec::with_capacity(self.slots);
        loop {
            while failure.is_none() && chunks.peek().is_some() && !free.is_empty() {
                if cancel.is_set() {
                    failure = Some(Error::Interrupted);
                    break;
                }
                let chunk = chunks.next().expect("a chunk was peeked");
                let slot = free.pop().expect("a free slot");
                slots[slot] = Some((chunk, 0));
                self.push(requests.entry(slot, &chunk, 0).user_data(slot as u64));
                in_flight += 1;
            }
            if in_flight == 0 {
                break;
            }
            if let Err(e) = self.ring.submit_and_wait(1)
                && !matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                )
            {
                failed_waits += 1;
                self.failed_wait(failed_waits, Error::io(op, path, e), &mut failure)?;
            }
            completed.clear();
            completed.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data() as usize, cqe.result())),
            );
            for &(slot, result) in &completed {
                let (chunk, done) = slots[slot].expect("a completion for a slot in flight");
                let short_ends = requests.short_is_final() || failure.is_some();
                match Reaped::of(&chunk, done, result, short_ends) {
                    Reaped::Partial(done) => {
                        // Ask for the rest in the same slot.
                        slots[slot] = Some((chunk, done));
                        self.push(requests.entry(slot, &chunk, done).user_data(slot as u64));
                        continue;
                    }
                    Reaped::Whole => {
                        progress.add(chunk.expect as u64);
                        moved += chunk.expect as u64;
                    }
                    Reaped::Failed(errno) => {
                        let e = std::io::Error::from_raw_os_error(errno);
                        failure.get_or_insert(Error::io(op, path, e));
                    }
                    Reaped::Short(at) => {
                        failure.get_or_insert(short_file(op, path, chunk.offset + at as u64));
                    }
                }
                slots[slot] = None;
                free.push(slot);
                in_flight -= 1;
            }
        }
        failure.map_or(Ok(moved), Err)
    }

    /// A wait for completions failed (the `failed`-th time): requests may still be in
    /// flight, so the caller keeps waiting for them, with `error` as the failure; after
    /// 100 the ring is taken as dead and their buffers are never freed (see `poisoned`).
    fn failed_wait(
        &mut self,
        failed: u32,
        error: Error,
        failure: &mut Option<Error>,
    ) -> Result<(), Error> {
        if failed > 100 {
            self.poisoned = true;
            return Err(error);
        }
        failure.get_or_insert(error);
        std::thread::sleep(std::time::Duration::from_millis(10));
        Ok(())
    }

    fn push(&mut self, entry: squeue::Entry) {
        // SAFETY: every buffer an entry points to stays alive and untouched until its
        // completion is reaped in `drive`, which never returns with requests in flight.
        // The queue has room: at most one entry per slot is ever pending.
        unsafe { self.ring.submission().push(&entry) }.expect("the submission queue has room");
    }
}
