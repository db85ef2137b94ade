//! What an image workload stores: its plan (the containers, the series and task every
//! place runs, and which records hold each place's figures), one item per place and
//! round (what the container cost besides its rates), and its summary (each place's
//! rates against the host folder's).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use serde_json::Value;

use crate::platform::container::ContainerSpec;
use crate::storage::item::{DiskItem, Op};
use crate::storage::read::ReadMode;

/// What `ratelab image` was asked to do, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImagePlan {
    /// The host folder: its own series is the baseline, and the containers live in a
    /// work folder under it.
    pub target: PathBuf,
    /// The folder under the target where images, exports and mounts are made.
    pub work_folder: PathBuf,
    /// The containers, in the order given.
    pub containers: Vec<ContainerSpec>,
    /// The params of the storage series every place runs, one pass per round (its
    /// target is the host folder), as a disk workload stores them.
    pub series: Value,
    /// The params of the task every place runs in every round, if asked (`--task`), as
    /// a task workload stores them.
    pub task: Option<Value>,
}

/// One place the work ran: the host folder or a container, and its records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Place {
    /// Its name in tables: `host folder`, `raw-sparse`, `qcow2 64 KiB`.
    pub label: String,
    /// The container; `None` for the host folder.
    pub container: Option<ContainerSpec>,
    /// The run's workload that holds its series.
    pub disk_workload: usize,
    /// The run's workload that holds its task, if a task ran.
    pub task_workload: Option<usize>,
}

/// An image workload's parameters as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageParams {
    /// The plan.
    #[serde(flatten)]
    pub plan: ImagePlan,
    /// The host folder first, then each container.
    pub places: Vec<Place>,
}

/// What one place cost in one round, besides the rates its series measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageItem {
    /// Index into `places`: 0 is the host folder.
    pub place: usize,
    /// The round, from 1.
    pub round: u32,
    /// Seconds to create, attach, format, check and mount the container (0 for the host).
    pub setup_seconds: f64,
    /// Whether the loop device reads its file with direct I/O, as the kernel says
    /// (`None` for the host folder).
    #[serde(default)]
    pub loop_direct_io: Option<bool>,
    /// The block device under the place, whose writes are counted (`vda`).
    #[serde(default)]
    pub host_device: Option<String>,
    /// Bytes the series wrote inside the place (writes and rewrites).
    pub written_bytes: u64,
    /// Bytes the series moved inside the place (written and read).
    pub moved_bytes: u64,
    /// Bytes the host device wrote while the series ran; `None` when unknown.
    #[serde(default)]
    pub device_written_bytes: Option<u64>,
    /// The image file's allocated bytes once the series' files were written.
    #[serde(default)]
    pub image_allocated_bytes: Option<u64>,
    /// What the filesystem inside held then.
    #[serde(default)]
    pub inner_used_bytes: Option<u64>,
    /// CPU seconds the qcow2 daemon used while the series ran.
    #[serde(default)]
    pub daemon_cpu_seconds: Option<f64>,
}

impl ImageItem {
    /// Bytes the host device wrote per byte written inside.
    pub fn write_amplification(&self) -> Option<f64> {
        let device = self.device_written_bytes? as f64;
        (self.written_bytes > 0).then(|| device / self.written_bytes as f64)
    }

    /// The daemon's CPU seconds per GiB moved.
    pub fn daemon_seconds_per_gib(&self) -> Option<f64> {
        let seconds = self.daemon_cpu_seconds?;
        (self.moved_bytes > 0).then(|| seconds / (self.moved_bytes as f64 / (1u64 << 30) as f64))
    }
}

/// An operation of a storage series as a place's figures name it: a write, a rewrite
/// in place, or a read in its mode; stored as its words (`write`, `read direct`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum PlaceOp {
    /// Files written.
    Write,
    /// Files rewritten in place.
    Rewrite,
    /// Files read in a mode.
    Read(ReadMode),
}

impl PlaceOp {
    /// The operation of series item `item`; `None` for a read in a mode this version
    /// does not know.
    pub fn of(item: &DiskItem) -> Option<PlaceOp> {
        match item.op {
            Op::Write => Some(PlaceOp::Write),
            Op::Rewrite => Some(PlaceOp::Rewrite),
            Op::Read => read_mode(&item.mode).map(PlaceOp::Read),
        }
    }
}

/// The read mode named `words` (`direct`).
fn read_mode(words: &str) -> Option<ReadMode> {
    use clap::ValueEnum as _;
    ReadMode::value_variants()
        .iter()
        .copied()
        .find(|mode| mode.as_str() == words)
}

impl std::fmt::Display for PlaceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlaceOp::Write => f.write_str(Op::Write.as_str()),
            PlaceOp::Rewrite => f.write_str(Op::Rewrite.as_str()),
            PlaceOp::Read(mode) => write!(f, "read {}", mode.as_str()),
        }
    }
}

impl From<PlaceOp> for String {
    fn from(op: PlaceOp) -> String {
        op.to_string()
    }
}

impl TryFrom<String> for PlaceOp {
    type Error = String;

    fn try_from(words: String) -> Result<PlaceOp, String> {
        match words.split_once(' ') {
            None if words == Op::Write.as_str() => Some(PlaceOp::Write),
            None if words == Op::Rewrite.as_str() => Some(PlaceOp::Rewrite),
            Some(("read", mode)) => read_mode(mode).map(PlaceOp::Read),
            _ => None,
        }
        .ok_or_else(|| format!("unknown operation {words:?}"))
    }
}

/// A place's rate of one operation against the host folder's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpRatio {
    /// The operation.
    pub op: PlaceOp,
    /// Median rate of the place's files of 64 MiB and more (its largest when none is).
    #[serde(default)]
    pub median_bytes_per_sec: Option<f64>,
    /// Median of the ratios of each file's rate to the host's file of the same size
    /// and round.
    #[serde(default)]
    pub ratio: Option<f64>,
    /// 95% confidence interval of that median (sign test); `None` below 6 pairs.
    #[serde(default)]
    pub ratio_low: Option<f64>,
    /// Its upper end.
    #[serde(default)]
    pub ratio_high: Option<f64>,
    /// Pairs of files compared.
    pub pairs: usize,
    /// Two-sided Mann-Whitney p of the place's rates against the host's, size by size
    /// pooled as ratios to the host's median at each size.
    #[serde(default)]
    pub p_value: Option<f64>,
}

/// One place's figures against the host folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaceSummary {
    /// Its name.
    pub label: String,
    /// Each operation of the series.
    pub ops: Vec<OpRatio>,
    /// Median bytes the host device wrote per byte written inside.
    #[serde(default)]
    pub write_amplification: Option<f64>,
    /// Median allocated bytes of the image.
    #[serde(default)]
    pub image_allocated_bytes: Option<f64>,
    /// Median bytes the filesystem inside held then.
    #[serde(default)]
    pub inner_used_bytes: Option<f64>,
    /// Median daemon CPU seconds per GiB moved.
    #[serde(default)]
    pub daemon_seconds_per_gib: Option<f64>,
    /// The whole task's rate at the most threads, over the host's.
    #[serde(default)]
    pub task_ratio: Option<f64>,
    /// Whether every loop device read its file with direct I/O (`None` for the host
    /// and qcow2, whose loop is buffered on purpose).
    #[serde(default)]
    pub loop_direct_io: Option<bool>,
}

/// The image workload's summary: every place against the host folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSummary {
    /// The host folder first, then each container.
    pub places: Vec<PlaceSummary>,
}
