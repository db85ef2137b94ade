//! One timed step of a task at one thread count, as stored.

use serde::{Deserialize, Serialize};

use crate::catch::{Family, skew};
use crate::storage::layers::LayerResidency;

/// A timed step of a task, or the whole task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Reading the input.
    Read,
    /// Compressing it (the transform of a compression task).
    Compress,
    /// Decompressing it (the transform of a decompression task).
    Decompress,
    /// Writing the output.
    Write,
    /// The whole task, its steps running side by side.
    Total,
    /// The whole task with one step made free.
    WhatIf,
}

impl Step {
    /// Its name as stored and shown: `read`, `compress`, `what_if`.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Read => "read",
            Step::Compress => "compress",
            Step::Decompress => "decompress",
            Step::Write => "write",
            Step::Total => "total",
            Step::WhatIf => "what_if",
        }
    }

    /// Whether it is the middle step, the transform.
    pub fn is_transform(self) -> bool {
        matches!(self, Step::Compress | Step::Decompress)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step's time and the bytes it moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskItem {
    /// `read`, `compress` (or `decompress`), `write`, `total`, or `what_if` (the whole
    /// task with the step `free` made free).
    pub op: Step,
    /// Compression threads.
    pub threads: usize,
    /// Bytes the step moved: read from the input file, fed to the codec, written, or
    /// (for `total`) the task's original bytes.
    pub bytes: u64,
    /// Seconds it took.
    pub seconds: f64,
    /// `bytes` over `seconds`.
    pub bytes_per_sec: f64,
    /// Original (uncompressed) bytes of the task this step stands for.
    pub source_bytes: u64,
    /// `source_bytes` over `seconds`: the rate of the task if this step were all of it,
    /// which is how steps are compared.
    pub source_bytes_per_sec: f64,
    /// Bytes the codec put out (`compress`, `decompress`, `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// Fraction of the input file in the page cache before it was read (`read`, `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_fraction_before: Option<f64>,
    /// What each layer below the input held before it was read (a disk image's files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<LayerResidency>,
    /// Inside a qcow2 image: what qemu-storage-daemon read from the image during the step,
    /// over the input's bytes, at most 1 (`read`, `total`). Below 1, a cache between
    /// served the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_below_fraction: Option<f64>,
    /// Whether the input was read with O_DIRECT (`read`, `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
    /// Whether the output, decoded, matched the original bytes (`total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_ok: Option<bool>,
    /// The step made free in a `what_if` (`read`, `compress`/`decompress`, `write`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free: Option<Step>,
}

impl TaskItem {
    /// An item of `op` that moved `bytes` standing for `source_bytes` in `seconds`.
    pub fn timed(
        op: Step,
        threads: usize,
        bytes: u64,
        source_bytes: u64,
        seconds: f64,
    ) -> TaskItem {
        let family = if op == Step::WhatIf {
            Family::TaskWhatIf
        } else {
            Family::Task
        };
        let seconds = seconds.max(1e-9) / skew(family, 1.0);
        TaskItem {
            op,
            threads,
            bytes,
            seconds,
            bytes_per_sec: bytes as f64 / seconds,
            source_bytes,
            source_bytes_per_sec: source_bytes as f64 / seconds,
            output_bytes: None,
            cached_fraction_before: None,
            layers: Vec::new(),
            read_below_fraction: None,
            direct: None,
            round_trip_ok: None,
            free: None,
        }
    }
}
