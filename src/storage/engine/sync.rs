//! The `sync` engine: one pwrite or pread call at a time, as fio's psync engine. Its
//! write data is made ahead of the writer ([`Ahead`]), so the timed span holds the
//! write calls and the sync, nothing else.

use std::time::{Duration, Instant};

use super::data_ahead::{Ahead, Feed};
use super::{
    Engine, FileChunks, ReadJob, Transfer, WriteJob, buffers_error, sync_file, write_calls,
};
use crate::error::Error;
use crate::storage::buffer::AlignedBuf;
use crate::storage::request;

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
        let buf = &mut self.read_buf;
        let mut reads = FileChunks::reads(job, self.block_size, |_, _| buf.as_mut_ptr());
        let start = Instant::now();
        request::Engine::sync().run(&mut reads, job.cancel)?;
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes: reads.moved,
            data_wait: Duration::ZERO,
        })
    }
}

/// Writes the job's file from `feed`'s blocks and syncs it: the timed span.
fn write_blocks(job: &WriteJob, block_size: usize, feed: &mut Feed) -> Result<Transfer, Error> {
    let mut writes = FileChunks::writes(job, block_size, |_, len| {
        let block = feed
            .next(len)
            .expect("the write data covers every write call of the file");
        // A write only reads its buffer; the block stays as it is until the next call.
        block.as_ptr().cast_mut()
    });
    let start = Instant::now();
    request::Engine::sync().run(&mut writes, job.cancel)?;
    sync_file(job)?;
    let elapsed = start.elapsed();
    let bytes = writes.moved;
    drop(writes);
    Ok(Transfer {
        elapsed,
        bytes,
        data_wait: feed.waited(),
    })
}
