//! The `null` engine: no I/O at all, so the series, the store and the reports can be
//! tested fast, as with fio's null engine. Its figures say nothing about storage.

use std::time::{Duration, Instant};

use super::engine::{Engine, ReadJob, WriteJob, read_chunks, write_chunks};
use crate::workload::Error;

/// Counts the bytes a real engine would move, and moves none.
pub struct NullEngine;

impl Engine for NullEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Duration, Error> {
        let start = Instant::now();
        for chunk in write_chunks(job.size, 1 << 20, job.direct) {
            if job.cancel.is_set() {
                return Err(Error::Interrupted);
            }
            job.progress.add(chunk.len as u64);
        }
        Ok(start.elapsed())
    }

    fn read(&mut self, job: &ReadJob) -> Result<Duration, Error> {
        let start = Instant::now();
        for chunk in read_chunks(job.size, 1 << 20, job.direct) {
            if job.cancel.is_set() {
                return Err(Error::Interrupted);
            }
            job.progress.add(chunk.expect as u64);
        }
        Ok(start.elapsed())
    }
}
