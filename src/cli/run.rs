//! `ratelab run FILE.toml`: the workloads of a scenario, side by side on one clock,
//! with the contention report.

use std::path::PathBuf;

use clap::Args;

use super::{MeasureArgs, scenario};
use crate::exit::Exit;
use crate::run::Schedule;
use crate::workload::Workload;

/// Options of `ratelab run`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "A scenario lists workloads in [[workload]] tables. Each has a \
kind (\"disk\" or \"net\"), a target (a folder, or the host running `ratelab net serve`: \
HOST, HOST:PORT or [IPv6]:PORT; else the port field, else 5301), an optional start_delay (\"2s\"), and any flag of its verb as a \
field, with - written as _: sizes = \"1G,1G\", direct = true, read = [\"direct\", \"cached\"]. \
At the top, interval = \"100ms\", alone = true and label = \"...\" set the run.\n\n\
Example:\n\n  alone = true\n\n  [[workload]]\n  kind = \"disk\"\n  target = \"/mnt/ssd1\"\n  \
sizes = \"1G,1G\"\n  direct = true\n\n  [[workload]]\n  kind = \"disk\"\n  target = \"/mnt/ssd2\"\n  \
start_delay = \"2s\"\n  duration = \"20s\"\n  direct = true\n\n  [[workload]]\n  kind = \"net\"\n  \
target = \"10.0.0.2:5420\"\n  parallel = 2"
)]
pub struct RunArgs {
    /// The scenario file.
    #[arg(value_name = "FILE.toml")]
    pub file: PathBuf,
    /// Output and storage options; --interval and --label override the file's.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab run`.
pub fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let scenario = scenario::load(&args.file)?;
    let n = scenario.workloads.len();
    let mut workloads: Vec<Box<dyn Workload>> =
        scenario.workloads.iter().map(|make| make(None)).collect();
    let schedule = if scenario.alone {
        workloads.extend(
            scenario
                .workloads
                .iter()
                .enumerate()
                .map(|(of, make)| make(Some(of))),
        );
        Schedule::alone_then_together(n, &scenario.delays)
    } else {
        Schedule::together(n, &scenario.delays)
    };
    let mut output = args.output.clone();
    output.interval = output.interval.or(scenario.interval);
    output.label = output.label.or(scenario.label);
    super::measure("run", &output, workloads, schedule)
}
