//! The validated options of a storage series, as the disk workload runs them and
//! as they are stored with the run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::platform::ioprio::IoPriority;
pub use crate::storage::engine::{DIRECT_ALIGN, EngineKind, SyncMode};
use crate::storage::layers::Layer;
pub use crate::storage::read::ReadMode;
use crate::vocab::units::format_size;

/// Which phases of the series run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Write the files only.
    Write,
    /// Read files kept by an earlier `--phase write --keep` run.
    Read,
    /// Write, then read back.
    Both,
}

impl Phase {
    /// Whether files are written.
    pub fn writes(self) -> bool {
        matches!(self, Phase::Write | Phase::Both)
    }

    /// Whether files are read.
    pub fn reads(self) -> bool {
        matches!(self, Phase::Read | Phase::Both)
    }
}

/// Smallest file of a sustained run.
pub const MIN_SUSTAINED_FILE: u64 = 16 << 20;

/// Largest bytes per I/O call: well under the kernel's cap on one read or write
/// (2 GiB less a page), which would otherwise look like a short file.
pub const MAX_BLOCK: usize = 256 << 20;
/// Largest memory for I/O buffers (block size times queue depth).
pub const MAX_BUFFERS: u64 = 4 << 30;

/// Everything a storage series needs, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskPlan {
    /// The folder under which the work folder is created.
    pub target: PathBuf,
    /// File sizes of one pass, in the order given.
    pub sizes_bytes: Vec<u64>,
    /// Passes; each writes and reads the series in a new random order.
    pub repeat: u32,
    /// Read modes, in the order they run; the first one is the headline `read`.
    pub read_modes: Vec<ReadMode>,
    /// Sync after the last write of each file.
    pub sync: SyncMode,
    /// Whether writes use O_DIRECT.
    pub direct_writes: bool,
    /// The I/O engine.
    pub engine: EngineKind,
    /// Bytes per I/O call.
    pub block_size_bytes: usize,
    /// Requests in flight (uring).
    pub queue_depth: u32,
    /// Which phases run.
    pub phase: Phase,
    /// Keep the files after the run.
    pub keep: bool,
    /// Seed of the random orders and of the data written.
    pub seed: u64,
    /// The link limit given with --link-rate, overriding what sysfs says.
    pub link_rate_bytes_per_sec: Option<f64>,
    /// Sustained mode: write (or read) without pause for this long instead of a series.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Sustained mode: the size of each file written in turn.
    #[serde(default)]
    pub file_size_bytes: Option<u64>,
    /// I/O priority of the workload's thread (`--ioprio`); the system's when absent.
    #[serde(default)]
    pub ioprio: Option<IoPriority>,
    /// After the reads, write each file again over itself in place (`--rewrite`).
    #[serde(default)]
    pub rewrite: bool,
    /// Files of the host below the target whose caches are evicted and measured before
    /// each read (a disk image's); none for a plain folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Layer>,
}

impl DiskPlan {
    /// A series of `sizes_bytes` on `target` with everyday settings: one pass, buffered
    /// writes with fsync, direct reads, the sync engine, 1 MiB calls.
    pub fn new(target: PathBuf, sizes_bytes: Vec<u64>, seed: u64) -> DiskPlan {
        DiskPlan {
            target,
            sizes_bytes,
            repeat: 1,
            read_modes: vec![ReadMode::Direct],
            sync: SyncMode::Fsync,
            direct_writes: false,
            engine: EngineKind::Sync,
            block_size_bytes: 1 << 20,
            queue_depth: 1,
            phase: Phase::Both,
            keep: false,
            seed,
            link_rate_bytes_per_sec: None,
            duration_s: None,
            file_size_bytes: None,
            ioprio: None,
            rewrite: false,
            layers: Vec::new(),
        }
    }

    /// What the run writes, in words, before it starts: `writes 8 files of 10 KiB to
    /// 2 GiB, 4 passes: 10.6 GiB in all, 2.65 GiB on disk at once`; `None` for a run
    /// that writes nothing, or only empty files (the null engine).
    pub fn writes_in_words(&self) -> Option<String> {
        if !self.phase.writes() || self.engine == EngineKind::Null {
            return None;
        }
        if let (Some(seconds), Some(file)) = (self.duration_s, self.file_size_bytes) {
            return Some(format!(
                "writes for {seconds} s in files of {}, written over in turn",
                format_size(file)
            ));
        }
        let (written, _) = self.pass_bytes();
        let passes = u64::from(self.repeat);
        let smallest = self.sizes_bytes.iter().min()?;
        let largest = self.sizes_bytes.iter().max()?;
        let sizes = if smallest == largest {
            format_size(*smallest)
        } else {
            format!("{} to {}", format_size(*smallest), format_size(*largest))
        };
        let series: u64 = self.sizes_bytes.iter().sum();
        let held = if self.keep { series * passes } else { series };
        Some(format!(
            "writes {} file{} of {sizes}, {passes} pass{}: {} in all, {} on disk at once",
            self.sizes_bytes.len(),
            if self.sizes_bytes.len() == 1 { "" } else { "s" },
            if passes == 1 { "" } else { "es" },
            format_size(written.saturating_mul(passes)),
            format_size(held)
        ))
    }

    /// Bytes one pass of the series writes (its writes and rewrites) and reads (each read
    /// mode); saturating, as these size progress bars and tallies.
    pub fn pass_bytes(&self) -> (u64, u64) {
        let series = self
            .sizes_bytes
            .iter()
            .fold(0u64, |sum, &size| sum.saturating_add(size));
        let writes = if self.phase.writes() {
            1 + u64::from(self.rewrite)
        } else {
            0
        };
        let reads = if self.phase.reads() {
            self.read_modes.len() as u64
        } else {
            0
        };
        (series.saturating_mul(writes), series.saturating_mul(reads))
    }

    /// Whether any I/O of the plan uses O_DIRECT, which needs aligned block sizes.
    pub fn uses_direct(&self) -> bool {
        (self.phase.writes() && self.direct_writes)
            || (self.phase.reads() && self.read_modes.contains(&ReadMode::Direct))
    }

    /// In sustained mode, how long to go on.
    pub fn sustained(&self) -> Option<std::time::Duration> {
        self.duration_s.map(std::time::Duration::from_secs_f64)
    }

    /// Checks what clap cannot: values that only make sense together.
    pub fn validate(&self) -> Result<(), String> {
        self.check_sustained()?;
        if self.rewrite && (self.duration_s.is_some() || self.phase != Phase::Both) {
            return Err(
                "--rewrite writes over the files a series wrote and read: it needs --phase both and no --duration".into(),
            );
        }
        self.check_sizes()?;
        self.check_block_size()?;
        if self.repeat == 0 {
            return Err("--repeat must be at least 1".into());
        }
        self.check_queue()?;
        if self.phase.reads() && self.read_modes.is_empty() {
            return Err("--read needs at least one mode (direct, flushed, cached)".into());
        }
        Ok(())
    }

    /// Checks a sustained run (`--duration`): a length, one phase, and files large
    /// enough.
    fn check_sustained(&self) -> Result<(), String> {
        let Some(seconds) = self.duration_s else {
            return Ok(());
        };
        if seconds.is_nan() || seconds <= 0.0 {
            return Err("--duration must be longer than zero".into());
        }
        if self.phase == Phase::Both {
            return Err("a sustained run writes or reads: give --phase write or --phase read with --duration".into());
        }
        // Smaller files would make thousands of items a second, each a file's
        // create and sync rather than the sustained rate.
        if self
            .file_size_bytes
            .is_none_or(|size| size < MIN_SUSTAINED_FILE)
        {
            return Err(format!(
                "--file-size must be at least {} in a sustained run",
                format_size(MIN_SUSTAINED_FILE)
            ));
        }
        Ok(())
    }

    /// Checks the series' sizes: some where it writes, none empty, and a total that
    /// fits in 64 bits over every repeat.
    fn check_sizes(&self) -> Result<(), String> {
        if self.sizes_bytes.is_empty() && self.phase.writes() && self.duration_s.is_none() {
            return Err("the series has no sizes: give at least one with --sizes".into());
        }
        if let Some(zero) = self.sizes_bytes.iter().position(|&s| s == 0) {
            return Err(format!(
                "size number {} of the series is 0: files must have at least one byte",
                zero + 1
            ));
        }
        let total = self
            .sizes_bytes
            .iter()
            .try_fold(0u64, |sum, &size| sum.checked_add(size));
        if total
            .and_then(|t| t.checked_mul(u64::from(self.repeat)))
            .is_none()
        {
            return Err("the series adds up to more than 16 EiB: give smaller --sizes".into());
        }
        Ok(())
    }

    /// Checks the block size: in range, and aligned where O_DIRECT is used.
    fn check_block_size(&self) -> Result<(), String> {
        if self.block_size_bytes == 0 || self.block_size_bytes > MAX_BLOCK {
            return Err(format!(
                "--block-size {} is out of range (1 byte to {})",
                format_size(self.block_size_bytes as u64),
                format_size(MAX_BLOCK as u64)
            ));
        }
        if self.uses_direct() && !self.block_size_bytes.is_multiple_of(DIRECT_ALIGN) {
            return Err(format!(
                "--block-size {} is not a multiple of 4 KiB, which O_DIRECT needs (--direct or --read direct)",
                format_size(self.block_size_bytes as u64)
            ));
        }
        Ok(())
    }

    /// Checks the queue depth: in range, and with I/O buffers of a bounded size.
    fn check_queue(&self) -> Result<(), String> {
        if self.queue_depth == 0 || self.queue_depth > 4096 {
            return Err(format!(
                "--queue-depth {} is out of range (1 to 4096)",
                self.queue_depth
            ));
        }
        let buffers = self.block_size_bytes as u64 * u64::from(self.queue_depth);
        if buffers > MAX_BUFFERS {
            return Err(format!(
                "--block-size {} times --queue-depth {} needs {} of I/O buffers; keep it under {}",
                format_size(self.block_size_bytes as u64),
                self.queue_depth,
                format_size(buffers),
                format_size(MAX_BUFFERS)
            ));
        }
        Ok(())
    }
}
