//! The flags that say how a storage series writes and reads each file, shared by the
//! verbs that run one (`disk`, `image`); each verb keeps its own sizes and passes.

use clap::Args;

use super::values::{parse_rate, parse_size};
use crate::exit::UsageError;
use crate::workload::disk::{DiskPlan, EngineKind, ReadMode, SyncMode};

/// How each file of a series is written and read.
#[derive(Debug, Args)]
pub struct SeriesArgs {
    /// Read modes, comma-separated; the first is the headline `read`.
    #[arg(
        long = "read",
        value_name = "MODE",
        value_enum,
        value_delimiter = ',',
        default_value = "direct"
    )]
    pub read_modes: Vec<ReadMode>,
    /// Sync after the last write of each file (part of the timed span).
    #[arg(long, value_enum, value_name = "MODE", default_value = "fsync")]
    pub sync: SyncMode,
    /// Write with O_DIRECT (tails that alignment does not cover go through the cache).
    #[arg(long)]
    pub direct: bool,
    /// I/O engine: sync (pread/pwrite), uring (io_uring), null (no I/O: tests ratelab itself).
    #[arg(long, value_enum, default_value = "sync")]
    pub engine: EngineKind,
    /// Bytes per I/O call.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub block_size: u64,
    /// Requests in flight with --engine uring.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub queue_depth: u32,
    /// After the reads, write each file again over itself in place, synced: the cost of
    /// writing into space the file already holds (items `rewrite`).
    #[arg(long)]
    pub rewrite: bool,
    /// Seed of the random orders, sizes and data [default: random].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// The link's limit, when sysfs cannot tell it (such as 600MB/s or 10Gbit/s).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub link_rate: Option<f64>,
}

impl SeriesArgs {
    /// Sets these choices on `plan`.
    pub fn apply(&self, plan: &mut DiskPlan) -> Result<(), UsageError> {
        plan.read_modes = dedup(&self.read_modes);
        plan.sync = self.sync;
        plan.direct_writes = self.direct;
        plan.engine = self.engine;
        plan.block_size_bytes = usize::try_from(self.block_size)
            .map_err(|_| UsageError(format!("--block-size {} is too large", self.block_size)))?;
        plan.queue_depth = self.queue_depth;
        plan.rewrite = self.rewrite;
        plan.link_rate_bytes_per_sec = self.link_rate;
        Ok(())
    }
}

/// Read modes in the order given, each once.
fn dedup(modes: &[ReadMode]) -> Vec<ReadMode> {
    let mut out = Vec::new();
    for mode in modes {
        if !out.contains(mode) {
            out.push(*mode);
        }
    }
    out
}
