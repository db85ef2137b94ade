//! The `null` engine: no I/O at all, so the series, the store and the reports can be
//! tested fast, as with fio's null engine. Its figures say nothing about storage: each
//! transfer is reported as taking the time it would at a made-up rate, so that a run is
//! the same every time and its reports can be checked to the letter.

use std::time::Duration;

use super::{Engine, ReadJob, Transfer, WriteJob};
use crate::control::{Cancel, Progress};
use crate::error::Error;

/// The rate the null engine reports every transfer at, bytes per second.
pub const NULL_BYTES_PER_SEC: f64 = 1e9;

/// Counts the bytes a real engine would move, and moves none.
pub struct NullEngine;

impl Engine for NullEngine {
    fn write(&mut self, job: &WriteJob) -> Result<Transfer, Error> {
        let chunks = job.chunks(1 << 20);
        count(chunks.map(|c| c.len), job.progress, job.cancel)
    }

    fn read(&mut self, job: &ReadJob) -> Result<Transfer, Error> {
        let chunks = job.chunks(1 << 20);
        count(chunks.map(|c| c.expect), job.progress, job.cancel)
    }
}

/// Counts the bytes of every call, as if each had moved them at [`NULL_BYTES_PER_SEC`].
fn count(
    calls: impl Iterator<Item = usize>,
    progress: &Progress,
    cancel: &Cancel,
) -> Result<Transfer, Error> {
    let mut bytes = 0;
    for len in calls {
        if cancel.is_set() {
            return Err(Error::Interrupted);
        }
        progress.add(len as u64);
        bytes += len as u64;
    }
    Ok(Transfer {
        elapsed: Duration::from_secs_f64(bytes as f64 / NULL_BYTES_PER_SEC),
        bytes,
        data_wait: Duration::ZERO,
    })
}
