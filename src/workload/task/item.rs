//! One timed step of a task at one thread count, as stored.

use serde::{Deserialize, Serialize};

use crate::catch::{Family, skew};
use crate::storage::layers::LayerResidency;

/// A step's time and the bytes it moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskItem {
    /// `read`, `compress` (or `decompress`), `write`, `total`, or `what_if` (the whole
    /// task with the step `free` made free).
    pub op: String,
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
    pub free: Option<String>,
}

impl TaskItem {
    /// An item of `op` that moved `bytes` standing for `source_bytes` in `seconds`.
    pub fn timed(
        op: &str,
        threads: usize,
        bytes: u64,
        source_bytes: u64,
        seconds: f64,
    ) -> TaskItem {
        let family = if op == "what_if" {
            Family::TaskWhatIf
        } else {
            Family::Task
        };
        let seconds = seconds.max(1e-9) / skew(family, 1.0);
        TaskItem {
            op: op.to_string(),
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
