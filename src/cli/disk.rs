//! `ratelab disk TARGET...`: the storage series.

use std::path::PathBuf;

use clap::Args;

use super::scenario::{Maker, ScenarioKind};
use super::series::SeriesArgs;
use super::values::{SizeList, parse_size, parse_size_list};
use super::{Command, MeasureArgs};
use crate::exit::{Exit, UsageError};
use crate::platform::ioprio::IoPriority;
use crate::run::Schedule;
use crate::workload::disk::{DiskKind, DiskPlan, DiskWorkload, Phase, series};
use crate::workload::{Kind, Workload};

/// The default series, from 10 KiB to 2 GiB.
pub const DEFAULT_SIZES: &str = "10K,100K,500K,1M,5M,10M,50M,100M,200M,400M,600M,800M,1G,2G";

/// Options of `ratelab disk`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Each write is timed from its first write call to the return of its \
sync; each read from its first read call to its last. Opening and closing files is outside the \
timed span. Before every read ratelab measures how much of the file is in the page cache \
(cachestat, or mincore on older kernels) and stores it with the item.\n\n\
Read modes:\n  direct   O_DIRECT reads with aligned buffers: the device, never the cache\n  \
flushed  the file is evicted from the page cache first, then read through it\n  \
cached   the file is read through a warm page cache, to show what the cache does"
)]
pub struct DiskArgs {
    /// Folders to measure; ratelab writes only inside a work folder it creates there.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<PathBuf>,
    /// File sizes of the series, comma-separated (K M G = KiB MiB GiB; KB MB GB = 10^3...).
    #[arg(long, value_name = "LIST", default_value = DEFAULT_SIZES, value_parser = parse_size_list, conflicts_with = "random")]
    pub sizes: SizeList,
    /// Draw N random sizes, uniform between --min and --max, instead of --sizes.
    #[arg(long, value_name = "N")]
    pub random: Option<usize>,
    /// Smallest random size.
    #[arg(long, value_name = "SIZE", default_value = "2M", value_parser = parse_size, requires = "random")]
    pub min: u64,
    /// Largest random size.
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size, requires = "random")]
    pub max: u64,
    /// Passes over the series, each in a new random order.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// How each file is written and read.
    #[command(flatten)]
    pub series: SeriesArgs,
    /// Which phases run: write, read (files kept by an earlier --keep run), or both.
    #[arg(long, value_enum, default_value = "both")]
    pub phase: Phase,
    /// Keep the written files (for a later --phase read).
    #[arg(long)]
    pub keep: bool,
    /// Sustained mode: write (or, with --phase read, read) without pause for this long,
    /// and report the rate over time and its knees, instead of a series of sizes.
    #[arg(long, value_name = "TIME", value_parser = super::values::parse_time, conflicts_with_all = ["random", "sizes"])]
    pub duration: Option<std::time::Duration>,
    /// Sustained mode: the size of each file written in turn.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size, requires = "duration")]
    pub file_size: u64,
    /// I/O priority of the workload: idle, be:0..7 or rt:0..7 (rt needs root). The
    /// disk's I/O scheduler must honour priorities (bfq, mq-deadline); with none, it has
    /// no effect.
    #[arg(long, value_name = "CLASS", value_parser = IoPriority::parse)]
    pub ioprio: Option<IoPriority>,
    /// Run each target alone first, then all at once, to measure what they do to each other.
    #[arg(long)]
    pub alone: bool,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

impl DiskArgs {
    /// The validated plan for one target.
    pub fn plan(&self, target: PathBuf, seed: u64) -> Result<DiskPlan, UsageError> {
        let sizes_bytes = match self.random {
            Some(0) => return Err(UsageError("--random must be at least 1".into())),
            Some(_) if self.min == 0 => {
                return Err(UsageError("--min must be at least 1 byte".into()));
            }
            Some(count) if self.min > self.max => {
                return Err(UsageError(format!(
                    "--min {} is above --max {} for --random {count}",
                    self.min, self.max
                )));
            }
            Some(count) => series::random_sizes(count, self.min, self.max, seed),
            None if self.duration.is_some() => Vec::new(),
            None => self.sizes.0.clone(),
        };
        // A sustained run writes unless told to read.
        let phase = match (self.duration, self.phase) {
            (Some(_), Phase::Both) => Phase::Write,
            (_, phase) => phase,
        };
        let mut plan = DiskPlan {
            repeat: self.repeat,
            phase,
            keep: self.keep,
            duration_s: self.duration.map(|d| d.as_secs_f64()),
            file_size_bytes: self.duration.map(|_| self.file_size),
            ioprio: self.ioprio,
            ..DiskPlan::new(target, sizes_bytes, seed)
        };
        self.series.apply(&mut plan)?;
        plan.validate().map_err(UsageError)?;
        Ok(plan)
    }
}

/// How a `kind = "disk"` entry of a scenario becomes a workload.
pub const SCENARIO: ScenarioKind = ScenarioKind {
    name: DiskKind::NAME,
    make: scenario_maker,
};

fn scenario_maker(command: Command, target: &str) -> Option<Result<Maker, String>> {
    let Command::Disk(args) = command else {
        return None;
    };
    let seed = args.series.seed.unwrap_or_else(rand::random);
    Some(args.plan(target.into(), seed).map_err(|e| e.0).map(|plan| {
        Box::new(move |alone_of: Option<usize>| -> Box<dyn Workload> {
            match alone_of {
                Some(of) => Box::new(DiskWorkload::alone_for(plan.clone(), of)),
                None => Box::new(DiskWorkload::new(plan.clone())),
            }
        }) as Maker
    }))
}

/// Runs `ratelab disk`.
pub fn run(args: DiskArgs) -> anyhow::Result<Exit> {
    let seed = args.series.seed.unwrap_or_else(rand::random);
    let plans = args
        .targets
        .iter()
        .map(|target| args.plan(target.clone(), seed))
        .collect::<Result<Vec<_>, UsageError>>()?;
    // Checks come before plans: a bad database is refused first, and a target that is
    // not a folder gets no plan, only the workload's refusal naming it.
    args.output.check_db()?;
    if !args.output.quiet {
        for plan in plans.iter().filter(|plan| plan.target.is_dir()) {
            if let Some(words) = plan.writes_in_words() {
                crate::report::terminal::say(
                    &format!("{}: ", plan.target.display()),
                    &format!("{words}{}", free_words(&plan.target)),
                );
            }
        }
    }
    let n = plans.len();
    let mut workloads: Vec<Box<dyn Workload>> = plans
        .iter()
        .map(|plan| Box::new(DiskWorkload::new(plan.clone())) as Box<dyn Workload>)
        .collect();
    let schedule = if args.alone {
        if n < 2 {
            return Err(
                UsageError("--alone needs two targets or more to compare with".into()).into(),
            );
        }
        for (of, plan) in plans.into_iter().enumerate() {
            workloads.push(Box::new(DiskWorkload::alone_for(plan, of)));
        }
        Schedule::alone_then_together(n, &[])
    } else {
        Schedule::together(n, &[])
    };
    super::measure(DiskKind::NAME, &args.output, workloads, schedule)
}

/// `; 75.3 GiB free there`, or nothing when the filesystem does not say.
fn free_words(target: &std::path::Path) -> String {
    match rustix::fs::statvfs(target) {
        Ok(vfs) if vfs.f_blocks > 0 => format!(
            "; {} free there",
            crate::vocab::units::format_size(vfs.f_bavail * vfs.f_frsize)
        ),
        _ => String::new(),
    }
}
