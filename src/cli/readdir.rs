//! `ratelab readdir FOLDER`: read every file of a folder uncached, as it is.

use std::path::PathBuf;

use clap::Args;

use super::MeasureArgs;
use super::values::parse_size;
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::disk::ReadMode;
use crate::workload::readdir::{ReaddirPlan, ReaddirWorkload};

/// Options of `ratelab readdir`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Reads every regular file of at least --min-size in FOLDER (and \
below it with --recursive), uncached: with O_DIRECT, or, where a filesystem refuses O_DIRECT, \
evicted from the page cache first. Symbolic links are not followed. Nothing is written. Files \
that cannot be read are reported as warnings and left out."
)]
pub struct ReaddirArgs {
    /// The folder to read.
    #[arg(value_name = "FOLDER")]
    pub folder: PathBuf,
    /// Read subfolders too.
    #[arg(long, short)]
    pub recursive: bool,
    /// Smallest file read.
    #[arg(long, value_name = "SIZE", default_value = "10KB", value_parser = parse_size)]
    pub min_size: u64,
    /// Read mode: direct, or flushed (evicted first, then read through the cache).
    #[arg(
        long = "read",
        value_name = "MODE",
        value_enum,
        default_value = "direct"
    )]
    pub read_mode: ReadMode,
    /// Bytes per read call.
    #[arg(long, value_name = "SIZE", default_value = "1M", value_parser = parse_size)]
    pub block_size: u64,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab readdir`.
pub fn run(args: ReaddirArgs) -> anyhow::Result<Exit> {
    if args.read_mode == ReadMode::Cached {
        return Err(UsageError(
            "--read cached would read the page cache: readdir reads direct or flushed".into(),
        )
        .into());
    }
    if args.block_size == 0 || !args.block_size.is_multiple_of(4096) || args.block_size > 256 << 20
    {
        return Err(UsageError(format!(
            "--block-size {} must be a multiple of 4 KiB up to 256 MiB",
            args.block_size
        ))
        .into());
    }
    let plan = ReaddirPlan {
        folder: args.folder.clone(),
        recursive: args.recursive,
        min_size_bytes: args.min_size.max(1),
        read_mode: args.read_mode,
        block_size_bytes: args.block_size as usize,
    };
    super::measure(
        "readdir",
        &args.output,
        vec![Box::new(ReaddirWorkload::new(plan))],
        Schedule::together(1, &[]),
    )
}
