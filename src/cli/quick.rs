//! `ratelab quick TARGET`: the destination check, compared with earlier checks of the
//! same target in the results database.

use std::path::{Path, PathBuf};

use clap::Args;

use super::MeasureArgs;
use crate::analysis::stats::Stats;
use crate::db::RunQuery;
use crate::exit::Exit;
use crate::run::Schedule;
use crate::workload::disk::DiskKind;
use crate::workload::disk::quick::QuickWorkload;
use crate::workload::disk::stored::QuickBaseline;
use crate::workload::{At, Stored};

/// Earlier checks looked at for the comparison.
const BASELINE_RUNS: usize = 10;

/// Options of `ratelab quick`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Writes one 50 MiB file, then 500 files of 4 KiB from 16 threads at \
once, each file synced, and times each part as a whole. A verdict says when either part ran at \
less than half the median of earlier checks of the same target."
)]
pub struct QuickArgs {
    /// The folder to check; ratelab writes only inside a work folder it creates there.
    #[arg(value_name = "TARGET")]
    pub target: PathBuf,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab quick`.
pub fn run(args: QuickArgs) -> anyhow::Result<Exit> {
    let baseline = baseline(&args.output, &args.target);
    let workload = QuickWorkload::new(args.target.clone(), rand::random(), baseline);
    super::measure(
        "quick",
        &args.output,
        vec![Box::new(workload)],
        Schedule::together(1, &[]),
    )
}

/// The medians of earlier complete checks of the same target, or none when there are
/// none (or no database to look in).
fn baseline(output: &MeasureArgs, target: &Path) -> Option<QuickBaseline> {
    let target = std::fs::canonicalize(target).ok()?.display().to_string();
    let store = output.history()?;
    let query = RunQuery {
        target: Some(target),
        limit: Some(BASELINE_RUNS),
        ..RunQuery::complete(&["quick"])
    };
    let runs: Vec<i64> = store
        .find_runs(&query)
        .unwrap_or_default()
        .iter()
        .map(|r| r.run_id)
        .collect();
    let (mut large, mut small) = (Vec::new(), Vec::new());
    for run in &runs {
        let Ok(doc) = store.load_run(*run) else {
            continue;
        };
        for index in 0..doc.workloads.len() {
            // A check whose items no longer read is left out of the baseline.
            let Ok(stored) = Stored::<DiskKind>::decode(At::new(&doc, index)) else {
                continue;
            };
            for item in &stored.items {
                match item.files {
                    Some(_) => small.push(item.bytes_per_sec),
                    None => large.push(item.bytes_per_sec),
                }
            }
        }
    }
    Some(QuickBaseline {
        runs: runs.len(),
        large_bytes_per_sec: Stats::of(&large)?.median,
        small_bytes_per_sec: Stats::of(&small)?.median,
    })
}
