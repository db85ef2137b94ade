//! `ratelab why -- COMMAND [ARGS…]` and `ratelab why --pid PID`: which step limits a
//! command, from its own threads' account, with each device and link it waited on set
//! against what ratelab measured of it before.

use std::path::PathBuf;

use clap::Args;

use super::MeasureArgs;
use super::values::parse_seconds;
use crate::db::{RunQuery, Store};
use crate::document::RunStatus;
use crate::exit::{Exit, UsageError};
use crate::run::Schedule;
use crate::workload::disk::{DiskKind, streaming_rate};
use crate::workload::iops::IopsKind;
use crate::workload::net::NetKind;
use crate::workload::why::{
    Ask, Capability, Lookup, WHAT_IF_NAMES, WhatIfPlan, WhyPlan, WhyWorkload,
};
use crate::workload::{At, Kind, Stored};

/// Most earlier runs of each kind looked at for a device's or link's capability.
const RUNS_LOOKED_AT: usize = 200;

/// Options of `ratelab why`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Runs COMMAND with ratelab's own stdin, stdout and stderr, as \
time(1) does, and follows its whole process tree (threads and children as they come and go) \
until it exits; or, with --pid, watches a running process and its children. --hz times a \
second, every thread's time is read from the kernel: on a CPU and waiting for one (schedstat), \
and the rest in the wait it is seen in (wchan, the system call and its descriptor): a read or \
write on a named block device, a send or receive on a socket (its peer and interface), a page \
fault, a timer. A wait on another process or thread of the tree (a pipe, a child, a mutex) is \
charged to what that one was doing, so `cat F | zstd` is limited by zstd's CPU or by cat's \
disk, whichever it is (docs/why.md).\n\n\
The answer comes first: the step that limits the command, where, its share of the wall time, \
the most the command could gain were that step free, and, for a device or link, its rate \
against what a stored disk, iops or net run measured of it (else its physical limit). The \
report, or with --json the run document, goes to stderr, so the command's stdout stays its \
own: --out FILE writes it to FILE instead, --out - to stdout after the command's output. The \
run is stored as kind `why`. ratelab exits with the command's exit code (128 + N where signal N ended \
it), or with its own: 2 for bad usage, 3 where the command cannot be started or the process \
is not there, 130 when interrupted (the command is ended, the run stored incomplete)."
)]
// The one --json of every measuring verb, whose document goes where this verb's report
// goes: stdout belongs to the command.
#[command(mut_arg("json", |a| a.help(
    "Write the run as one JSON document instead of the report: to stderr, or where --out says"
)))]
pub struct WhyArgs {
    /// Watch this running process and its children instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid: watch at most this long: seconds (`20`) or a time (`20s`, `2m`) [default: until it exits].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub seconds: Option<std::time::Duration>,
    /// Samples a second.
    #[arg(long, value_name = "HZ", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub hz: u32,
    /// Then measure by how much each step limits it: run it again with the step slowed
    /// (cpu, disk_read, disk_write) or made free (reads_free), in rounds beside unchanged runs.
    #[arg(
        long,
        value_name = "STEPS",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with = "pid",
        long_help = "Then measure by how much each step limits the command: after the watched \
run, run it again, 2 × ROUNDS times for each step, alternating an unchanged run with one \
where the step is changed: `cpu` (its processes in a cgroup with half the CPUs they kept \
busy), `disk_read` / `disk_write` (its block device held, for its processes, to half the \
bytes per second it moved while the command waited on it, or half the requests where \
they are small), `net` (its TCP traffic with the peer it waited on, that way, held to \
half the rate its interface moved, in an ifb queue of its own; needs root), `reads_free` (the \
files it read already in the page cache; needs no root). The command's time over the \
unchanged run's, less 1, is the share of it that moves with the step (its sensitivity). \
Without STEPS, every step with 10% of the wall time or more; STEPS names them, \
comma-separated (`cpu,disk_write`; `disk` and `net` for both ways). \
Slowing needs root or a cgroup delegated to this user. The command's side effects happen \
again in every run."
    )]
    pub what_if: Option<String>,
    /// Rounds of each --what-if: an unchanged run and a changed one each.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub what_if_rounds: u32,
    /// Write the report (or the --json document) to this file instead of stderr; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The command to run, after `--`.
    #[arg(last = true, value_name = "COMMAND", required_unless_present = "pid")]
    pub command: Vec<String>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab why`.
pub fn run(args: WhyArgs) -> anyhow::Result<Exit> {
    if args.command.first().is_some_and(|c| c.is_empty()) {
        return Err(UsageError("COMMAND is empty: give a program to run after `--`".into()).into());
    }
    if args.seconds.is_some() && args.pid.is_none() {
        return Err(UsageError(
            "--seconds is for --pid: a command is watched until it exits".into(),
        )
        .into());
    }
    if args.seconds.is_some_and(|s| s.is_zero()) {
        return Err(UsageError("--seconds 0 watches nothing: give a time above 0".into()).into());
    }
    let what_if = args
        .what_if
        .as_deref()
        .map(|steps| what_if_plan(steps, args.what_if_rounds))
        .transpose()?;
    if let Some(asked) = &what_if {
        crate::report::terminal::say("ratelab: ", &what_if_notice(&args.command, asked));
    }
    let interval = args.output.interval.unwrap_or(crate::run::DEFAULT_INTERVAL);
    let plan = WhyPlan {
        command: args.command,
        pid: args.pid,
        seconds: args.seconds.map(|s| s.as_secs_f64()),
        hz: f64::from(args.hz),
        interval_s: interval.as_secs_f64(),
        what_if,
    };
    let lookup = (!args.output.no_store).then(|| lookup(args.output.db.path.clone()));
    // The command's output is its own: no progress, and the report on stderr.
    let mut output = args.output.clone();
    output.quiet = true;
    let code = std::rc::Rc::new(std::cell::Cell::new(None));
    let kept = std::rc::Rc::clone(&code);
    let extras = super::Extras {
        then: Some(Box::new(move |run| {
            kept.set(command_exit(run));
            Ok(())
        })),
        out: args.out,
        to_stderr: true,
        ..super::Extras::default()
    };
    let exit = super::measure_with(
        "why",
        &output,
        vec![Box::new(WhyWorkload::new(plan, lookup))],
        Schedule::together(1, &[]),
        extras,
    )?;
    Ok(match (exit, code.get()) {
        (Exit::Success, Some(code)) => Exit::Command(code),
        (exit, _) => exit,
    })
}

/// The what-ifs `--what-if STEPS` asks for, the names checked.
fn what_if_plan(steps: &str, rounds: u32) -> Result<WhatIfPlan, UsageError> {
    let steps: Vec<String> = steps
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if let Some(unknown) = steps.iter().find(|s| !WHAT_IF_NAMES.contains(&s.as_str())) {
        return Err(UsageError(format!(
            "unknown step \"{unknown}\" for --what-if (use {})",
            WHAT_IF_NAMES.join(", ")
        )));
    }
    Ok(WhatIfPlan { steps, rounds })
}

/// What --what-if will do, said before the command starts: how many more times it runs.
fn what_if_notice(command: &[String], asked: &WhatIfPlan) -> String {
    let which = if asked.steps.is_empty() {
        "each step with 10% of its time or more".to_string()
    } else {
        asked.steps.join(", ")
    };
    format!(
        "--what-if runs `{}` 1 + 2 × {} × S times, S the steps it changes ({which}): its side effects happen each time",
        command.join(" "),
        asked.rounds
    )
}

/// The exit code a finished `why` run passes on: the command's, or 128 + the signal
/// that ended it; none with --pid.
fn command_exit(run: &crate::workload::Decoded) -> Option<u8> {
    if run.doc.status != RunStatus::Complete {
        return None;
    }
    run.view(0).ok().flatten()?.command_end()?.shell_status()
}

/// Finds what stored runs measured of a device or link: the best of this machine's
/// disk and iops runs on the same device, or net runs to the same peer on the same
/// interface.
fn lookup(db: Option<PathBuf>) -> Lookup {
    Box::new(move |ask: &Ask| {
        let store = Store::open_existing(db.as_deref())?;
        let hostname = crate::platform::probe_machine().hostname;
        if ask.step.on_device() {
            device_capability(&store, &hostname, ask)
        } else {
            link_capability(&store, &hostname, ask)
        }
    })
}

/// The complete runs of this machine with a workload of `kind`, newest first.
fn runs_of(store: &Store, hostname: &str, kind: &str) -> Vec<crate::document::RunDocument> {
    let query = RunQuery {
        kind: Some(kind.into()),
        status: Some(RunStatus::Complete),
        hostname: Some(hostname.into()),
        limit: Some(RUNS_LOOKED_AT),
        ..RunQuery::default()
    };
    store
        .find_runs(&query)
        .unwrap_or_default()
        .iter()
        .filter_map(|run| store.load_run(run.run_id).ok())
        .collect()
}

/// The fastest rate a disk or iops run measured on the asked device, in the asked way.
fn device_capability(store: &Store, hostname: &str, ask: &Ask) -> Option<Capability> {
    let chain = ask.chain.as_ref()?;
    let op = if ask.step == crate::account::Step::DiskRead {
        "read"
    } else {
        "write"
    };
    let mut best: Option<(f64, i64, String)> = None;
    let mut offer = |rate: f64, run: i64, what: String| {
        if best.as_ref().is_none_or(|(b, _, _)| rate > *b) {
            best = Some((rate, run, what));
        }
    };
    for doc in runs_of(store, hostname, DiskKind::NAME) {
        let id = doc.run_id.unwrap_or_default();
        for index in 0..doc.workloads.len() {
            let Ok(w) = Stored::<DiskKind>::decode(At::new(&doc, index)) else {
                continue;
            };
            if w.context
                .chain
                .as_ref()
                .is_some_and(|c| c.same_device(chain))
                && let Some(rate) = streaming_rate(&w.items, op)
            {
                offer(
                    rate,
                    id,
                    format!("run {id} (disk, {op}s of its large files)"),
                );
            }
        }
    }
    for doc in runs_of(store, hostname, IopsKind::NAME) {
        let id = doc.run_id.unwrap_or_default();
        for index in 0..doc.workloads.len() {
            let Ok(w) = Stored::<IopsKind>::decode(At::new(&doc, index)) else {
                continue;
            };
            if !w
                .context
                .chain
                .as_ref()
                .is_some_and(|c| c.same_device(chain))
            {
                continue;
            }
            for item in w.items.iter().filter(|i| i.op.as_str() == op) {
                offer(
                    item.bytes_per_sec,
                    id,
                    format!("run {id} (iops {} {op})", item.test),
                );
            }
        }
    }
    let (rate, run, source) = best?;
    Some(Capability {
        step: ask.step,
        place: ask.place.clone(),
        bytes_per_sec: Some(rate),
        run_id: Some(run),
        source,
    })
}

/// The fastest rate a net run to the asked peer over the asked interface received.
fn link_capability(store: &Store, hostname: &str, ask: &Ask) -> Option<Capability> {
    let peer = ask.peer?;
    let interface = ask.nic.as_ref()?.name.clone();
    let mut best: Option<(f64, i64)> = None;
    for doc in runs_of(store, hostname, NetKind::NAME) {
        let id = doc.run_id.unwrap_or_default();
        for index in 0..doc.workloads.len() {
            let Ok(w) = Stored::<NetKind>::decode(At::new(&doc, index)) else {
                continue;
            };
            let to_peer = w
                .context
                .address
                .as_deref()
                .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                .is_some_and(|a| a.ip() == peer);
            let over = w
                .context
                .interface
                .as_ref()
                .is_some_and(|n| n.name == interface);
            let rate = w
                .summary
                .as_ref()
                .and_then(|s| s.receive.as_ref())
                .map(|r| r.bytes_per_sec);
            if to_peer
                && over
                && let Some(rate) = rate
                && best.is_none_or(|(b, _)| rate > b)
            {
                best = Some((rate, id));
            }
        }
    }
    let (rate, run) = best?;
    Some(Capability {
        step: ask.step,
        place: ask.place.clone(),
        bytes_per_sec: Some(rate),
        run_id: Some(run),
        source: format!("run {run} (net to {peer})"),
    })
}
