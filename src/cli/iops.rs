//! `ratelab iops TARGET`: block I/O as every disk benchmark shows it, on one test file
//! made under TARGET: sequential and random tests at several depths, read and write,
//! in rounds, each with IOPS, MB/s and completion-latency percentiles.

use std::path::PathBuf;

use clap::Args;

use super::scenario::{Maker, ScenarioKind};
use super::values::parse_size;
use super::{Command, MeasureArgs};
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::iops::{BlockTest, DEFAULT_TESTS, IopsKind, IopsPlan, IopsWorkload, Rw};
use crate::workload::{Kind, Workload};

/// Options of `ratelab iops`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Makes one test file of --size in a work folder under TARGET and fills it \
with unique, incompressible data before anything is timed. Each test of --tests (ORDER BLOCK-Q \
DEPTH T THREADS, as CrystalDiskMark names them: SEQ1M-Q8T1 is sequential 1 MiB blocks, 8 in \
flight on one thread; RND4K-Q32T16 is random 4 KiB blocks, 32 in flight on each of 16 threads; K \
and M are KiB and MiB) runs each direction of --rw for a ramp that is not counted, then \
--repeat rounds of --seconds one after another, each stored; the table shows each test's median \
round (its rates and its latency) and the range of the rounds' IOPS, as CrystalDiskMark and \
KDiskMark repeat a test to show its spread; mix:70 draws each request's direction at random, 70% reads, and shows its reads \
and writes apart, as fio's randrw. Random offsets are aligned to the block and uniform over the file, each block once \
per pass. Depth 1 uses pread and pwrite, deeper queues io_uring; requests bypass the page cache \
(O_DIRECT) unless --buffered, which also fills the file through the page cache and ends each \
write test with an fsync outside the counted span (fio's end_fsync), so a writeback error fails \
the test. What direct I/O takes is asked of the filesystem (statx) or the device: a test whose \
block it does not take (512-byte blocks on a 4Kn disk) is refused before anything is written, \
and so is one whose buffers (threads x depth x block, twice that for writes) would take more \
than a quarter of the memory available. A request's latency runs from the moment its slot was free to \
take it to its completion, as fio's total latency (lat): the mean is depth / IOPS. The file is \
removed at the end, on error and on Ctrl-C."
)]
pub struct IopsArgs {
    /// The folder whose storage is tested.
    #[arg(value_name = "TARGET")]
    pub target: PathBuf,
    /// The test file's size (K M G are KiB MiB GiB).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub size: u64,
    /// Tests, comma-separated: SEQ1M-Q8T1, RND4K-Q32T1, any block, depth and threads.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = DEFAULT_TESTS, value_parser = parse_test)]
    pub tests: Vec<BlockTest>,
    /// What each test does, in turn, comma-separated: read, write, mix:70 (70% reads).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "read,write",
        value_parser = parse_rw
    )]
    pub rw: Vec<Rw>,
    /// Seconds each round of each test and direction is counted.
    #[arg(long, value_name = "SECONDS", default_value = "5")]
    pub seconds: f64,
    /// Seconds before the first round, not counted.
    #[arg(long, value_name = "SECONDS", default_value = "1")]
    pub ramp: f64,
    /// Rounds of each test and direction, one after another, each stored.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// Requests through the page cache instead of O_DIRECT.
    #[arg(long)]
    pub buffered: bool,
    /// Seed of the offsets and the data [default: random].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// A direction of --rw, or what is wrong with it.
fn parse_rw(text: &str) -> Result<Rw, String> {
    text.parse()
}

/// A test of --tests, or what is wrong with it.
fn parse_test(text: &str) -> Result<BlockTest, String> {
    text.parse()
}

impl IopsArgs {
    /// The validated plan.
    pub fn plan(&self) -> Result<IopsPlan, UsageError> {
        let plan = IopsPlan {
            target: self.target.clone(),
            size_bytes: self.size,
            tests: self.tests.clone(),
            rw: self.rw.clone(),
            seconds: self.seconds,
            ramp_seconds: self.ramp,
            repeat: self.repeat,
            direct: !self.buffered,
            seed: self.seed.unwrap_or_else(rand::random),
        };
        plan.validate().map_err(UsageError)?;
        Ok(plan)
    }
}

/// How a `kind = "iops"` entry of a scenario becomes a workload.
pub const SCENARIO: ScenarioKind = ScenarioKind {
    name: IopsKind::NAME,
    make: scenario_maker,
};

fn scenario_maker(command: Command, _target: &str) -> Option<Result<Maker, String>> {
    let Command::Iops(args) = command else {
        return None;
    };
    Some(args.plan().map_err(|e| e.0).map(|plan| {
        Box::new(move |alone_of: Option<usize>| -> Box<dyn Workload> {
            Box::new(IopsWorkload::new(plan.clone()).standing_for(alone_of))
        }) as Maker
    }))
}

/// Runs `ratelab iops`.
pub fn run(args: IopsArgs) -> anyhow::Result<Exit> {
    let plan = args.plan()?;
    // As disk's plan line: a bad database is refused first, and a target that is not a
    // folder gets only the workload's refusal naming it.
    args.output.check_db()?;
    if !args.output.quiet && plan.target.is_dir() {
        crate::report::terminal::say(
            &format!("{}: ", plan.target.display()),
            &plan.time_in_words(),
        );
    }
    super::measure(
        "iops",
        &args.output,
        vec![Box::new(IopsWorkload::new(plan))],
        Schedule::together(1, &[]),
    )
}
