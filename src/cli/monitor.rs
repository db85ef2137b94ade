//! `ratelab monitor [-- CMD ...]`: sample every core's residency, frequency and power,
//! and the threads of a command while it runs.

use clap::Args;

use super::MeasureArgs;
use super::values::parse_seconds;
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::monitor::{MonitorPlan, MonitorWorkload};

/// How long the monitor samples with neither a command nor a limit.
const DEFAULT_SECONDS: f64 = 10.0;

/// Options of `ratelab monitor`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Samples every --interval (default 100ms): each core's active residency \
(/proc/stat), frequency (cpufreq, else APERF/MPERF through /dev/cpu/N/msr as root), package \
power (powercap RAPL, else hwmon) and, with CMD, the CPU each of CMD's threads last ran on, with \
its policy and nice. A source this machine lacks is reported as unavailable with the reason \
(null in the samples), never as zero.\n\n\
With CMD, ratelab starts it and samples until it exits (or until --samples or --seconds, when \
ratelab kills it). CMD's standard output goes to ratelab's standard error, so that ratelab's \
standard output holds results only; its standard input and error are ratelab's. Without CMD \
and without a limit, the monitor samples for 10 seconds."
)]
pub struct MonitorArgs {
    /// Stop after N samples.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..),
        conflicts_with = "seconds"
    )]
    pub samples: Option<u64>,
    /// Stop after this long: seconds (`20`) or a time (`20s`, `2m`) [default without CMD: 10].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub seconds: Option<std::time::Duration>,
    /// A command to start and watch until it exits, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Output and storage options; --interval is also the monitor's sampling interval.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab monitor`.
pub fn run(args: MonitorArgs) -> anyhow::Result<Exit> {
    let interval = args.output.interval.unwrap_or(crate::run::DEFAULT_INTERVAL);
    // /proc/stat counts in ticks of 10 ms (USER_HZ 100): shorter samples hold none.
    if interval < std::time::Duration::from_millis(10) {
        return Err(UsageError(format!(
            "--interval {} is shorter than the 10 ms tick /proc/stat counts in: give 10ms or more",
            humantime::format_duration(interval)
        ))
        .into());
    }
    let seconds = args.seconds.map(|s| s.as_secs_f64());
    if seconds.is_some_and(|s| s < interval.as_secs_f64()) {
        return Err(UsageError(format!(
            "--seconds {} is shorter than one --interval ({} s): there would be no sample",
            seconds.unwrap_or_default(),
            interval.as_secs_f64()
        ))
        .into());
    }
    let unlimited = args.command.is_empty() && args.samples.is_none() && seconds.is_none();
    let plan = MonitorPlan {
        samples: args.samples,
        seconds: if unlimited {
            Some(DEFAULT_SECONDS)
        } else {
            seconds
        },
        command: args.command,
        ..MonitorPlan::every(interval)
    };
    super::measure(
        "monitor",
        &args.output,
        vec![Box::new(MonitorWorkload::new(plan))],
        Schedule::together(1, &[]),
    )
}
