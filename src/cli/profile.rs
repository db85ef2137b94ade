//! `ratelab profile`: the main job. A storage series in each target folder (the current
//! one by default), the cpu tests at one and all threads with the monitor beside them,
//! a network test (loopback against a server ratelab runs itself, or a peer's `net
//! serve`), and a compression task on a file it makes in the first target, set beside
//! the storage series. The parts run one after another, so none takes from another.
//! The stored run is then read back from the database and written as an HTML report.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde_json::Value;

use super::MeasureArgs;
use super::disk::DEFAULT_SIZES;
use super::values::parse_size_list;
use crate::analysis::compare::{Finding, compare};
use crate::document::{RunDocument, Severity, Verdict};
use crate::exit::{Exit, UsageError};
use crate::report::units::format_size;
use crate::run::{Member, Schedule};
use crate::store::Store;
use crate::workload::Workload;
use crate::workload::cpu::kernels::DEFAULT_TESTS;
use crate::workload::cpu::{Budget, CpuPlan, CpuWorkload, SchedClass};
use crate::workload::disk::{DiskPlan, DiskWorkload};
use crate::workload::monitor::{MonitorPlan, MonitorWorkload};
use crate::workload::net::{DEFAULT_PORT, NetPlan, NetWorkload};
use crate::workload::task::{Codec, Direction, TaskPlan, TaskWorkload};

/// The quick profile's storage series: up to 256 MiB, four passes (the fewest items per
/// size with which a rank test can call a change against the last profile: with three
/// on each side its smallest two-sided p-value is 0.1).
const QUICK_SIZES: &str = "10K,100K,1M,10M,64M,256M";
const QUICK_PASSES: u32 = 4;
/// The compression task's test file, quick and full.
const QUICK_TASK_BYTES: u64 = 128 << 20;
const TASK_BYTES: u64 = 1 << 30;

/// Options of `ratelab profile`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Runs, one after another: a storage series in each --target \
(written in a work folder ratelab makes there and removes), the cpu tests at one and all \
threads with the monitor beside them, a TCP test (over loopback against a server ratelab \
starts itself, or to --peer's `ratelab net serve`), and a zstd task on a file it makes in the \
first target. The run is stored, then read back from the database and written as a \
self-contained HTML report (--report, or reports/run-ID.html beside the database)."
)]
pub struct ProfileArgs {
    /// A short profile (about a minute): files up to 256 MiB.
    #[arg(long)]
    pub quick: bool,
    /// Folders to profile the storage of [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub target: Vec<PathBuf>,
    /// Test the network to this host's `ratelab net serve` (port 5301) instead of loopback.
    #[arg(long, value_name = "HOST")]
    pub peer: Option<String>,
    /// Write the HTML report here [default: reports/run-ID.html beside the database].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab profile`.
pub fn run(args: ProfileArgs) -> anyhow::Result<Exit> {
    let (sizes, repeat) = if args.quick {
        (QUICK_SIZES, QUICK_PASSES)
    } else {
        (DEFAULT_SIZES, 1)
    };
    let targets = if args.target.is_empty() {
        vec![std::env::current_dir().context("cannot read the current folder")?]
    } else {
        args.target.clone()
    };
    let sizes = parse_size_list(sizes).expect("built-in sizes parse").0;
    let cpus = crate::platform::probe_machine().logical_cpus.max(1);
    let one_and_all = if cpus > 1 { vec![1, cpus] } else { vec![1] };

    let mut workloads: Vec<Box<dyn Workload>> = Vec::new();
    for target in &targets {
        let plan = DiskPlan {
            repeat,
            ..DiskPlan::new(target.clone(), sizes.clone(), rand::random())
        };
        plan.validate().map_err(UsageError)?;
        workloads.push(Box::new(DiskWorkload::new(plan)));
    }
    let cpu = CpuPlan {
        tests: DEFAULT_TESTS.iter().map(|t| t.to_string()).collect(),
        threads: one_and_all.clone(),
        classes: vec![SchedClass::Normal],
        cpus: None,
        budget: Budget::Seconds(if args.quick { 0.3 } else { 1.0 }),
        baseline: None,
    };
    // The monitor samples residency and frequency beside the cpu tests, until they end.
    let done = Arc::new(AtomicBool::new(false));
    let mut monitor = MonitorPlan::every(crate::run::DEFAULT_INTERVAL);
    monitor.pid = Some(std::process::id());
    let cpu_index = workloads.len();
    workloads.push(Box::new(
        CpuWorkload::new(cpu).signal_when_done(Arc::clone(&done)),
    ));
    workloads.push(Box::new(MonitorWorkload::new(monitor).until(done)));
    let seconds = Duration::from_secs(if args.quick { 3 } else { 10 });
    // A sender and a receiver thread per stream: one stream per two CPUs.
    let streams = (cpus / 2).clamp(1, 16) as u32;
    let net = match &args.peer {
        Some(host) => NetPlan {
            host: host.clone(),
            port: DEFAULT_PORT,
            own_server: false,
            ..NetPlan::loopback(seconds, streams)
        },
        None => NetPlan::loopback(seconds, streams),
    };
    workloads.push(Box::new(NetWorkload::new(net)));
    let task = TaskPlan {
        file: None,
        make_file_bytes: Some(if args.quick {
            QUICK_TASK_BYTES
        } else {
            TASK_BYTES
        }),
        out: targets[0].clone(),
        codec: Codec::Zstd,
        level: Codec::Zstd.default_level(),
        threads: one_and_all,
        direction: Direction::Compress,
        keep: false,
        seed: rand::random(),
    };
    workloads.push(Box::new(TaskWorkload::new(task, Value::Null)));

    // Each part alone, but the monitor runs beside the cpu tests.
    let mut schedule = Schedule::one_by_one(workloads.len());
    schedule.groups[cpu_index].push(Member {
        workload: cpu_index + 1,
        delay: Duration::ZERO,
    });
    schedule.groups.remove(cpu_index + 1);
    let output = args.output.clone();
    let report = args.report.clone();
    let extras = super::Extras {
        judge: last_profile(&args.output).map(changes_since),
        then: Some(Box::new(move |doc| write_report(&output, report, doc))),
    };
    super::measure_with("profile", &args.output, workloads, schedule, extras)
}

/// Profile runs of this machine looked through for the last complete one.
const PROFILES_LOOKED_AT: usize = 20;
/// Changed figures named in the verdict; the rest are counted.
const CHANGES_NAMED: usize = 6;

/// The newest complete profile of this machine (by host name) in the database.
fn last_profile(output: &MeasureArgs) -> Option<RunDocument> {
    let store = Store::open_existing(output.db.as_deref())?;
    let host = crate::platform::probe_machine().hostname;
    store
        .list_runs()
        .ok()?
        .into_iter()
        .filter(|r| r.verb == "profile" && r.status == "complete")
        .take(PROFILES_LOOKED_AT)
        .find_map(|r| {
            store
                .load_run(r.run_id)
                .ok()
                .filter(|doc| doc.machine.hostname == host)
        })
}

/// The verdict on what moved beyond the noise since `previous`, by the same test as
/// `results compare` (Mann-Whitney U on the items, and a change of 5% or more).
fn changes_since(previous: RunDocument) -> crate::run::Judge {
    Box::new(move |doc| {
        let comparison = compare(&[previous.clone(), doc.clone()]);
        let mut moved: Vec<(f64, String)> = Vec::new();
        let (mut compared, mut too_few) = (0, 0);
        for workload in &comparison.workloads {
            let target = workload
                .targets
                .iter()
                .flatten()
                .next()
                .cloned()
                .unwrap_or_default();
            for group in &workload.groups {
                let Some(change) = group.changes.first() else {
                    continue;
                };
                compared += 1;
                if change.finding == Finding::TooFewItems {
                    too_few += 1;
                }
                if !change.beyond_noise {
                    continue;
                }
                let Some(ratio) = change.ratio else { continue };
                let mut what = vec![group.key.op.clone()];
                what.extend(group.key.size_bytes.map(format_size));
                what.extend(group.key.threads.map(|t| format!("{t} threads")));
                moved.push((
                    ratio,
                    format!("{} {target} {}: {ratio:.2}x", workload.kind, what.join(" ")),
                ));
            }
        }
        let previous_name = format!(
            "profile run {} of this machine ({})",
            previous.run_id.unwrap_or_default(),
            previous.started_at
        );
        let verdict = Verdict::about(None);
        if moved.is_empty() {
            return vec![verdict(
                "unchanged_since_last_profile",
                Severity::Info,
                format!(
                    "no figure moved beyond the noise since {previous_name} ({compared} groups of items compared, {too_few} of them with too few items to tell)"
                ),
            )];
        }
        // The largest moves first, either way.
        moved.sort_by(|a, b| b.0.ln().abs().total_cmp(&a.0.ln().abs()));
        let slower = moved.iter().any(|(ratio, _)| *ratio < 1.0);
        let named: Vec<&str> = moved
            .iter()
            .take(CHANGES_NAMED)
            .map(|m| m.1.as_str())
            .collect();
        let more = moved.len().saturating_sub(CHANGES_NAMED);
        vec![verdict(
            "changed_since_last_profile",
            if slower {
                Severity::Warning
            } else {
                Severity::Info
            },
            format!(
                "{} figures moved beyond the noise since {previous_name}: {}{}",
                moved.len(),
                named.join("; "),
                if more > 0 {
                    format!("; and {more} more (see `ratelab results compare`)")
                } else {
                    String::new()
                }
            ),
        )]
    })
}

/// Writes the HTML report of the finished run, read back from the database when it was
/// stored, and says where on stderr.
fn write_report(
    output: &MeasureArgs,
    chosen: Option<PathBuf>,
    doc: &RunDocument,
) -> anyhow::Result<()> {
    let stored = doc.run_id.and_then(|id| {
        Store::open_existing(output.db.as_deref()).map(|store| (id, store.load_run(id)))
    });
    let (path, page) = match (chosen, stored) {
        (chosen, Some((id, loaded))) => {
            let loaded = loaded.context("cannot read the run back for its report")?;
            let path = match chosen {
                Some(path) => path,
                None => reports_folder(output)?.join(format!("run-{id}.html")),
            };
            (path, crate::report::html::render(&loaded))
        }
        (Some(path), None) => (path, crate::report::html::render(doc)),
        (None, None) => return Ok(()),
    };
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("cannot create {}", folder.display()))?;
    }
    crate::report::emit(page.as_bytes(), Some(&path))?;
    eprintln!("report: {}", path.display());
    Ok(())
}

/// `reports/` beside the results database.
fn reports_folder(output: &MeasureArgs) -> anyhow::Result<PathBuf> {
    let db = Store::path(output.db.as_deref())?;
    Ok(db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("reports"), |p| p.join("reports")))
}
