//! What a task stores of its context besides its plan and items: the source, the
//! folders and storage chains it read and wrote, and what stored disk runs measured
//! there. The live workload writes these very types and the kind reads them back, so
//! the two cannot drift apart.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::item::Step;
use crate::platform::StorageChain;

/// What the platform and the store said of a task's source and output, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskContext {
    /// Size of the original file; null before it was known.
    #[serde(default)]
    pub source_bytes: Option<u64>,
    /// Whether ratelab made the original (`--make-file`).
    pub made_file: bool,
    /// The folder the read steps read from.
    #[serde(default)]
    pub read_folder: Option<PathBuf>,
    /// The folder the outputs were written in; always stored, absent only in a default.
    #[serde(default)]
    pub write_folder: Option<PathBuf>,
    /// The storage under the read folder; null if not probed.
    #[serde(default)]
    pub read_chain: Option<StorageChain>,
    /// The storage under the write folder; null if not probed.
    #[serde(default)]
    pub write_chain: Option<StorageChain>,
    /// What the newest stored disk runs measured there; null when none did.
    #[serde(default)]
    pub disk_runs: Option<DiskRuns>,
}

/// The streaming rates storage series measured on a task's read and write folders.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskRuns {
    /// The read folder's read rate; absent when no series covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<DiskRead>,
    /// The write folder's write rate; absent when no series covers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<DiskWrite>,
}

/// A storage series' streaming read rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskRead {
    /// The stored run it comes from; absent for a series of the task's own run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// The folder the series measured.
    pub target: String,
    /// Median read rate of its large files.
    pub read_bytes_per_sec: f64,
}

/// A storage series' streaming write rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskWrite {
    /// The stored run it comes from; absent for a series of the task's own run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// The folder the series measured.
    pub target: String,
    /// Median write rate of its large files.
    pub write_bytes_per_sec: f64,
}

/// One step's storage rate, read or write alike, to set beside the task's step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskRate<'a> {
    /// [`Step::Read`] or [`Step::Write`].
    pub op: Step,
    /// The stored run it comes from; `None` for a series of the task's own run.
    pub run_id: Option<i64>,
    /// The folder the series measured.
    pub target: &'a str,
    /// Its streaming rate.
    pub bytes_per_sec: f64,
}

impl DiskRuns {
    /// Whether no series covers either folder.
    pub fn is_empty(&self) -> bool {
        self.read.is_none() && self.write.is_none()
    }

    /// The read rate, then the write rate, where a series covers them.
    pub fn rates(&self) -> Vec<DiskRate<'_>> {
        let read = self.read.as_ref().map(|r| DiskRate {
            op: Step::Read,
            run_id: r.run_id,
            target: &r.target,
            bytes_per_sec: r.read_bytes_per_sec,
        });
        let write = self.write.as_ref().map(|w| DiskRate {
            op: Step::Write,
            run_id: w.run_id,
            target: &w.target,
            bytes_per_sec: w.write_bytes_per_sec,
        });
        read.into_iter().chain(write).collect()
    }
}
