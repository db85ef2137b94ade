//! The `uring` engine: io_uring with up to `--queue-depth` requests in flight, as
//! fio's io_uring engine without registered files or buffers, through the storage
//! core's one request engine.

use std::time::{Duration, Instant};

use super::{Engine, FileChunks, ReadJob, Transfer, WriteJob, buffers_error, sync_file};
use crate::error::Error;
use crate::storage::buffer::SlotBufs;
use crate::storage::data::Pattern;
use crate::storage::request;

/// io_uring reads and writes, `queue_depth` at a time.
pub struct UringEngine {
    engine: request::Engine,
    block_size: usize,
    data: Pattern,
    read_bufs: SlotBufs,
}

impl UringEngine {
    /// A ring for `queue_depth` requests of `block_size` bytes, writing data seeded
    /// with `seed`.
    pub fn new(block_size: usize, queue_depth: u32, seed: u64) -> Result<UringEngine, Error> {
        let slots = queue_depth as usize;
        let engine = request::Engine::uring(slots, "the series (use --engine sync)")?;
        Ok(UringEngine {
            engine,
            block_size,
            data: Pattern::new(slots, block_size, seed).map_err(buffers_error)?,
            read_bufs: SlotBufs::new(slots, block_size).map_err(buffers_error)?,
        })
    }
}

impl Engine for UringEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Transfer, Error> {
        let data = &mut self.data;
        let mut writes = FileChunks::writes(job, self.block_size, |slot, len| {
            data.block(slot, len).as_mut_ptr()
        });
        let start = Instant::now();
        self.engine.run(&mut writes, job.cancel)?;
        sync_file(job)?;
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes: writes.moved,
            // Its data is stamped as each request is queued, on this thread.
            data_wait: Duration::ZERO,
        })
    }

    fn read(&mut self, job: &ReadJob) -> Result<Transfer, Error> {
        let bufs = &mut self.read_bufs;
        let mut reads =
            FileChunks::reads(job, self.block_size, |slot, _| bufs.slot(slot).as_mut_ptr());
        let start = Instant::now();
        self.engine.run(&mut reads, job.cancel)?;
        Ok(Transfer {
            elapsed: start.elapsed(),
            bytes: reads.moved,
            data_wait: Duration::ZERO,
        })
    }
}
