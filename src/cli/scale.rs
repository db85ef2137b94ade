//! `ratelab scale -- CMD ...`: any command at 1..N CPUs.

use clap::Args;

use super::MeasureArgs;
use super::values::{CountList, parse_count_list, parse_size};
use crate::exit::{Exit, UsageError};
use crate::platform::cores;
use crate::run::Schedule;
use crate::workload::scale::{Limit, ScalePlan, ScaleWorkload};

/// Options of `ratelab scale`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Runs CMD --repeat rounds, each of every CPU count in turn (so a \
machine whose speed drifts moves every count alike), and reports the median wall time, the speedup over the fewest CPUs and the efficiency. By default \
a run may use the first n online CPUs (an affinity mask its children inherit); with --vcpus \
it may use every CPU but only n CPUs' worth of time (a CFS quota in a cgroup, as a VM with n \
vCPUs; needs root). CMD's stdout is discarded; its stderr is ratelab's."
)]
pub struct ScaleArgs {
    /// CPU counts: 1..4 or 1,2,4 [default: 1..(online CPUs)].
    #[arg(long, value_name = "RANGE", value_parser = parse_count_list)]
    pub cpus: Option<CountList>,
    /// Runs per CPU count.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// Bytes one run processes, to report throughput.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bytes: Option<u64>,
    /// Limit CPU time with a cgroup quota instead of pinning to CPUs (needs root).
    #[arg(long)]
    pub vcpus: bool,
    /// The command to run, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab scale`.
pub fn run(args: ScaleArgs) -> anyhow::Result<Exit> {
    let online = cores::online_cpus();
    let cpus = match &args.cpus {
        Some(list) => list.0.clone(),
        None => (1..=online.len().max(1)).collect(),
    };
    if let Some(bad) = cpus
        .iter()
        .find(|&&n| n == 0 || (!args.vcpus && n > online.len()))
    {
        return Err(UsageError(format!(
            "--cpus {bad} is out of range: this machine has {} online CPUs",
            online.len()
        ))
        .into());
    }
    if args.repeat == 0 {
        return Err(UsageError("--repeat 0 runs nothing: give 1 or more".into()).into());
    }
    if args.bytes == Some(0) {
        return Err(UsageError(
            "--bytes 0 gives no throughput: give the bytes a run processes".into(),
        )
        .into());
    }
    let plan = ScalePlan {
        command: args.command.clone(),
        cpus,
        repeat: args.repeat,
        bytes: args.bytes,
        limit: if args.vcpus {
            Limit::Quota
        } else {
            Limit::Affinity
        },
        online,
    };
    super::measure(
        "scale",
        &args.output,
        vec![Box::new(ScaleWorkload::new(plan))],
        Schedule::together(1, &[]),
    )
}
