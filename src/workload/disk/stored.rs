//! What a disk workload stores besides its items: its params (the plan, and for a quick
//! check what it wrote), its context (the storage chain and the limit its figures were
//! checked against) and its summary. The live workload writes these very types and the
//! kind reads them back, so the two cannot drift apart.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::plan::DiskPlan;
use crate::platform::StorageChain;
use crate::storage::rates::{Headline, SizeRow};

/// A disk workload's parameters as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskParams {
    /// The validated plan of the series.
    #[serde(flatten)]
    pub plan: DiskPlan,
    /// For a destination check (`ratelab quick`), what it wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick: Option<QuickShape>,
}

/// What a destination check writes: one large file, then many small ones at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuickShape {
    /// The large file's size.
    pub large_bytes: u64,
    /// How many small files.
    pub small_files: u64,
    /// Each small file's size.
    pub small_bytes: u64,
    /// Threads writing small files at once.
    pub threads: usize,
}

/// What the platform said of a disk workload's target, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskContext {
    /// The storage from the target's filesystem down to its link; null if not probed.
    #[serde(default)]
    pub chain: Option<StorageChain>,
    /// The limit the figures were checked against; null when unknown.
    #[serde(default)]
    pub max_bytes_per_sec: Option<f64>,
    /// Where that limit came from: `--link-rate` or `sysfs`.
    #[serde(default)]
    pub limit_source: Option<String>,
    /// The work folder, when its files were kept (`--keep`).
    #[serde(default)]
    pub kept_folder: Option<String>,
    /// For a destination check, the medians of earlier checks of the same target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<QuickBaseline>,
}

/// The medians of earlier destination checks of one target.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuickBaseline {
    /// How many earlier checks.
    pub runs: usize,
    /// Their large file's median rate.
    pub large_bytes_per_sec: f64,
    /// Their small files' median rate.
    pub small_bytes_per_sec: f64,
}

/// A disk workload's summary: the headline of writes, of reads in each mode (`read` is
/// the first mode's, `read_<mode>` each one's), and the statistics per size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSummary {
    /// Writes; null when none ran.
    pub write: Option<Headline>,
    /// Writes over files in place (`--rewrite`); absent when none ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Headline>,
    /// `read` and `read_<mode>`, in the plan's order; null for a mode with no item.
    #[serde(flatten)]
    pub reads: IndexMap<String, Option<Headline>>,
    /// Each operation, mode and file size.
    pub by_size: Vec<SizeRow>,
}
