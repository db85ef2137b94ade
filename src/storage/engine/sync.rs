//! The `sync` engine: one pwrite or pread call at a time, as fio's psync engine. Its
//! write data is made ahead of the writer ([`Ahead`]), so the timed span holds the
//! write calls and the sync, nothing else.

use std::time::Instant;

use super::data_ahead::{Ahead, Feed};
use super::{
    Engine, ReadJob, Transfer, WriteJob, buffers_error, short_file, sync_file, write_calls,
};
use crate::error::Error;
use crate::storage::buffer::AlignedBuf;

/// pread/pwrite in a loop, one block per call.
pub struct SyncEngine {
    block_size: usize,
    read_buf: AlignedBuf,
    seed: u64,
    /// The write data; made on the first write by an engine made only to read.
    data: Option<Ahead>,
}

impl SyncEngine {
    /// An engine moving `block_size` bytes per call, writing data seeded with `seed`.
    pub fn new(block_size: usize, seed: u64) -> std::io::Result<SyncEngine> {
        Ok(SyncEngine {
            seed,
            data: Some(Ahead::new(block_size, seed)?),
            ..SyncEngine::reader(block_size)?
        })
    }

    /// An engine for workloads that only read: no write data made up front.
    pub fn reader(block_size: usize) -> std::io::Result<SyncEngine> {
        Ok(SyncEngine {
            block_size,
            read_buf: AlignedBuf::new(block_size)?,
            seed: 0,
            data: None,
        })
    }
}

impl Engine for SyncEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Transfer, Error> {
        let data = match &mut self.data {
            Some(data) => data,
            None => self
                .data
                .insert(Ahead::new(self.block_size, self.seed).map_err(buffers_error)?),
        };
        let blocks = write_calls(job.size, self.block_size, job.direct);
        let block_size = self.block_size;
        data.run(blocks, |feed| write_blocks(job, block_size, feed))
            .map_err(|e| {
                Error::Unsupported(format!(
                    "cannot start the thread that makes write data ahead: {e}"
                ))
            })?
    }

    fn read(&mut self, job: &ReadJob) -> Result<Transfer, Error> {
        let chunks = job.chunks(self.block_size);
        let buf = self.read_buf.as_mut_slice();
        let mut bytes = 0;
        let start = Instant::now();
        for chunk in chunks {
            if job.cancel.is_set() {
                return Err(Error::Interrupted);
            }
            let mut done = 0;
            while done < chunk.expect {
                // A direct read must keep its full aligned length; past the end of the
                // file the kernel returns only what is there.
                let want = if job.direct {
                    chunk.len
                } else {
                    chunk.expect - done
                };
                match rustix::io::pread(
                    job.file,
                    &mut buf[done..done + want],
                    chunk.offset + done as u64,
                ) {
                    Ok(0) => return Err(short_file("read", job.path, chunk.offset + done as u64)),
                    Ok(n) => done += n,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(Error::io("read", job.path, e)),
                }
                if job.direct && done < chunk.expect {
                    return Err(short_file("read", job.path, chunk.offset + done as u64));
                }
            }
            job.progress.add(chunk.expect as u64);
            bytes += chunk.expect as u64;
        }
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes,
        })
    }
}

/// Writes the job's file from `feed`'s blocks and syncs it: the timed span.
fn write_blocks(job: &WriteJob, block_size: usize, feed: &mut Feed) -> Result<Transfer, Error> {
    let chunks = job.chunks(block_size);
    let mut bytes = 0;
    let start = Instant::now();
    for chunk in chunks {
        if job.cancel.is_set() {
            return Err(Error::Interrupted);
        }
        let fd = match (chunk.tail, job.tail_file) {
            (true, Some(tail)) => tail,
            _ => job.file,
        };
        let buf = feed
            .next(chunk.len)
            .expect("the write data covers every write call of the file");
        let mut done = 0;
        while done < chunk.len {
            let bytes = &buf[done..];
            match rustix::io::pwrite(fd, bytes, chunk.offset + done as u64) {
                Ok(0) => {
                    return Err(Error::io("write", job.path, std::io::ErrorKind::WriteZero));
                }
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(Error::io("write", job.path, e)),
            }
        }
        job.progress.add(chunk.len as u64);
        bytes += chunk.len as u64;
    }
    sync_file(job)?;
    Ok(Transfer {
        elapsed: start.elapsed(),
        bytes,
    })
}
