//! `ratelab profile`: the main job. A storage series and random 4 KiB tests at depth 32
//! and 1 in each target folder (the current one by default), the cpu tests at 1, 2, 4 … and all threads with the monitor beside them,
//! a network test (loopback against a server ratelab runs itself, or a peer's `net
//! serve`), and a compression task on a file it makes in the first target, set beside
//! the storage series. The parts run one after another, so none takes from another.
//! The run is then stored and written as an HTML report, from the same decoded views
//! the terminal report shows.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::MeasureArgs;
use super::disk::DEFAULT_SIZES;
use super::values::{parse_host_port, parse_size_list};
use crate::analysis::since::since;
use crate::db::Address;
use crate::document::RunDocument;
use crate::error::Error;
use crate::exit::{Exit, UsageError};
use crate::report::layout::Detail;
use crate::run::{Member, Schedule};
use crate::workload::cpu::kernels::DEFAULT_TESTS;
use crate::workload::cpu::{Budget, CpuPlan, CpuWorkload, SchedClass};
use crate::workload::disk::{DiskPlan, DiskWorkload};
use crate::workload::iops::{IopsPlan, IopsWorkload, Rw};
use crate::workload::monitor::{MonitorPlan, MonitorWorkload};
use crate::workload::net::{DEFAULT_PORT, NetPlan, NetWorkload};
use crate::workload::task::{Codec, Direction, TaskPlan, TaskWorkload};
use crate::workload::{Decoded, Workload};

/// The quick profile's storage series: up to 256 MiB, four passes (the fewest items per
/// size with which a rank test can call a change against the last profile: with three
/// on each side its smallest two-sided p-value is 0.1).
const QUICK_SIZES: &str = "10K,100K,1M,10M,64M,256M";
const QUICK_PASSES: u32 = 4;
/// The random 4 KiB tests each target gets, read and write: their test file, quick and
/// full, and their rounds and counted seconds a round. Three rounds, as `ratelab iops`
/// runs by default, in about the time one round took before there were rounds (2 s
/// quick, 4 s full), so a profile takes no longer: 4 x (0.5 + 3 x 0.7) s = 10.4 s
/// quick, 4 x (1 + 3 x 1.5) s = 22 s full.
const IOPS_TESTS: &str = "RND4K-Q32T1,RND4K-Q1T1";
const QUICK_IOPS_BYTES: u64 = 256 << 20;
const IOPS_BYTES: u64 = 1 << 30;
const IOPS_ROUNDS: u32 = 3;
const QUICK_IOPS_SECONDS: f64 = 0.7;
const IOPS_SECONDS: f64 = 1.5;
/// The compression task's test file, quick and full.
const QUICK_TASK_BYTES: u64 = 128 << 20;
const TASK_BYTES: u64 = 1 << 30;

/// Options of `ratelab profile`.
#[derive(Debug, Args)]
#[command(
    after_long_help = "Runs, one after another: a storage series in each --target \
(written in a work folder ratelab makes there and removes) and random 4 KiB reads and writes \
at depth 32 and 1 on a test file there, the cpu tests at 1, 2, 4 … and all \
threads with the monitor beside them, a TCP test (over loopback against a server ratelab \
starts itself, or to --peer's `ratelab net serve`), and a zstd task on a file it makes in the \
first target. The run is stored, then written as a \
self-contained HTML report (--report, or reports/run-ID.html beside the database)."
)]
pub struct ProfileArgs {
    /// A short profile (about a minute): files up to 256 MiB.
    #[arg(long)]
    pub quick: bool,
    /// Folders to profile the storage of [default: the current folder].
    #[arg(long, value_name = "DIR")]
    pub target: Vec<PathBuf>,
    /// Test the network to this host's `ratelab net serve` instead of loopback
    /// (HOST, HOST:PORT or [IPv6]:PORT; port 5301 by default).
    #[arg(long, value_name = "HOST", value_parser = parse_host_port)]
    pub peer: Option<(String, Option<u16>)>,
    /// --peer runs `iperf3 -s` (port 5201 by default), spoken to in iperf3's protocol.
    #[arg(long, requires = "peer")]
    pub iperf3: bool,
    /// Also measure disk images in the first target: a raw-sparse and a qcow2 container
    /// (64 KiB clusters) beside the folder, as `ratelab image` does (needs root).
    #[arg(long)]
    pub images: bool,
    /// Write the HTML report here [default: reports/run-ID.html beside the database].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab profile`.
pub fn run(args: ProfileArgs) -> anyhow::Result<Exit> {
    let targets = if args.target.is_empty() {
        vec![std::env::current_dir().context("cannot read the current folder")?]
    } else {
        args.target.clone()
    };
    // The CPUs it may use: under taskset or a cpuset, fewer than the machine's.
    let cpus = crate::platform::cores::allowed_cpus().len().max(1);
    let mut workloads = storage(&targets, args.quick)?;
    let cpu_index = workloads.len();
    workloads.extend(cores(cpus, args.quick));
    workloads.push(network(args.peer.as_ref(), args.iperf3, cpus, args.quick));
    workloads.push(task(&targets[0], cpus, args.quick));
    // Each part alone, but the monitor runs beside the cpu tests; an image run's records
    // come after it and are never scheduled (it measures them).
    let mut schedule = Schedule::one_by_one(workloads.len() + usize::from(args.images));
    if args.images {
        let first = workloads.len();
        workloads.extend(super::image::for_profile(&targets[0], first)?);
    }
    schedule.groups[cpu_index].push(Member {
        workload: cpu_index + 1,
        delay: Duration::ZERO,
    });
    schedule.groups.remove(cpu_index + 1);
    // Where the report goes is settled before a minute of measuring, not after.
    let report = report_path(args.report.as_ref(), &args.output)?;
    let extras = super::Extras {
        judge: last_profile(&args.output).map(changes_since),
        then: Some(Box::new(move |run| write_report(report, run))),
        detail: Detail::Brief,
        ..super::Extras::default()
    };
    super::measure_with("profile", &args.output, workloads, schedule, extras)
}

/// A storage series in each target folder, then its random 4 KiB tests.
fn storage(targets: &[PathBuf], quick: bool) -> anyhow::Result<Vec<Box<dyn Workload>>> {
    let (sizes, repeat) = if quick {
        (QUICK_SIZES, QUICK_PASSES)
    } else {
        (DEFAULT_SIZES, 1)
    };
    let sizes = parse_size_list(sizes).expect("built-in sizes parse").0;
    let mut workloads: Vec<Box<dyn Workload>> = Vec::new();
    for target in targets {
        let plan = DiskPlan {
            repeat,
            ..DiskPlan::new(target.clone(), sizes.clone(), rand::random())
        };
        plan.validate().map_err(UsageError)?;
        workloads.push(Box::new(DiskWorkload::new(plan)));
        let iops = IopsPlan {
            target: target.clone(),
            size_bytes: if quick { QUICK_IOPS_BYTES } else { IOPS_BYTES },
            tests: IOPS_TESTS
                .split(',')
                .map(|t| t.parse().expect("built-in tests parse"))
                .collect(),
            rw: vec![Rw::Read, Rw::Write],
            seconds: if quick {
                QUICK_IOPS_SECONDS
            } else {
                IOPS_SECONDS
            },
            ramp_seconds: if quick { 0.5 } else { 1.0 },
            repeat: IOPS_ROUNDS,
            direct: true,
            seed: rand::random(),
        };
        iops.validate().map_err(UsageError)?;
        workloads.push(Box::new(IopsWorkload::new(iops)));
    }
    Ok(workloads)
}

/// The cpu tests at 1, 2, 4 … and all threads, and the monitor that samples residency
/// and frequency beside them until they end.
fn cores(cpus: usize, quick: bool) -> [Box<dyn Workload>; 2] {
    let cpu = CpuPlan {
        tests: DEFAULT_TESTS.iter().map(|t| t.to_string()).collect(),
        threads: thread_counts(cpus),
        classes: vec![SchedClass::Normal],
        cpus: crate::platform::cores::inherited_cpus(),
        budget: Budget::Seconds(if quick { 0.3 } else { 1.0 }),
        baseline: None,
    };
    let done = Arc::new(AtomicBool::new(false));
    let mut monitor = MonitorPlan::every(crate::run::DEFAULT_INTERVAL);
    monitor.pid = Some(std::process::id());
    [
        Box::new(CpuWorkload::new(cpu).signal_when_done(Arc::clone(&done))),
        Box::new(MonitorWorkload::new(monitor).until(done)),
    ]
}

/// A TCP test over loopback against a server ratelab runs itself, or to `peer` (an
/// iperf3 server when `iperf3`).
fn network(
    peer: Option<&(String, Option<u16>)>,
    iperf3: bool,
    cpus: usize,
    quick: bool,
) -> Box<dyn Workload> {
    let seconds = Duration::from_secs(if quick { 3 } else { 10 });
    // A sender and a receiver thread per stream: one stream per two CPUs.
    let streams = (cpus / 2).clamp(1, 16) as u32;
    let net = match peer {
        Some((host, port)) => NetPlan {
            host: host.clone(),
            port: port.unwrap_or(if iperf3 {
                crate::workload::net::iperf3::wire::DEFAULT_PORT
            } else {
                DEFAULT_PORT
            }),
            own_server: false,
            iperf3,
            ..NetPlan::loopback(seconds, streams)
        },
        None => NetPlan::loopback(seconds, streams),
    };
    Box::new(NetWorkload::new(net))
}

/// A zstd task on a file it makes in `folder`, at the cpu tests' thread counts.
fn task(folder: &Path, cpus: usize, quick: bool) -> Box<dyn Workload> {
    let task = TaskPlan {
        file: None,
        make_file_bytes: Some(if quick { QUICK_TASK_BYTES } else { TASK_BYTES }),
        out: folder.to_path_buf(),
        codec: Codec::Zstd,
        level: Codec::Zstd.default_level(),
        threads: thread_counts(cpus),
        direction: Direction::Compress,
        keep: false,
        seed: rand::random(),
        // Three more whole tasks per thread count: a few seconds at these sizes.
        what_if: true,
        layers: Vec::new(),
    };
    Box::new(TaskWorkload::new(task, None))
}

/// The thread counts the cpu tests and the task run at: the powers of two below the
/// CPUs, then all of them. Four or more counts let the scaling laws be fitted and told
/// apart (on 8 CPUs and up); on 2 CPUs it is one and all.
pub(super) fn thread_counts(cpus: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |n| n.checked_mul(2))
        .take_while(|&n| n < cpus)
        .collect();
    counts.push(cpus.max(1));
    counts
}

/// The newest complete profile of this machine (by host name) in the database.
fn last_profile(output: &MeasureArgs) -> Option<RunDocument> {
    super::last_run("profile", output)
}

/// The verdicts on what moved since `previous` (see [`since`]).
fn changes_since(previous: RunDocument) -> crate::run::Judge {
    Box::new(move |run| {
        let then = crate::workload::profile_figures(&crate::workload::Decoded::of(&previous))?;
        let now = crate::workload::profile_figures(run)?;
        let mut verdicts = since(&previous, run.doc, &then, &now);
        verdicts.extend(crate::analysis::since::moved(
            &previous, run.doc, &then, &now,
        ));
        Ok(verdicts)
    })
}

/// Where the report goes: a file named with --report, or reports/ beside the database,
/// where it is named by the run's id.
pub(super) enum ReportPlace {
    File(PathBuf),
    Folder(PathBuf),
}

/// The report's place, its folder made and checked writable; none for an unstored run
/// without --report.
pub(super) fn report_path(
    report: Option<&PathBuf>,
    output: &MeasureArgs,
) -> anyhow::Result<Option<ReportPlace>> {
    let (place, folder) = match (report, output.no_store) {
        (Some(path), _) => {
            let folder = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (ReportPlace::File(path.clone()), folder)
        }
        (None, true) => return Ok(None),
        (None, false) => {
            let folder = reports_folder(output)?;
            (ReportPlace::Folder(folder.clone()), folder)
        }
    };
    let shown = match &place {
        ReportPlace::File(path) => path.clone(),
        ReportPlace::Folder(folder) => folder.join("run-ID.html"),
    };
    let refuse = |reason: String| Error::Target {
        path: shown.clone(),
        reason: format!("{reason} (the --report file)"),
    };
    std::fs::create_dir_all(&folder).map_err(|e| refuse(e.to_string().to_lowercase()))?;
    if !folder.is_dir() {
        return Err(refuse("its folder is not a directory".into()).into());
    }
    let writable =
        |p: &std::path::Path| rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok();
    if !writable(&folder) || (shown.exists() && !writable(&shown)) {
        return Err(refuse("permission denied".into()).into());
    }
    Ok(Some(place))
}

/// Writes the HTML report of the finished run (as it was stored) to the place
/// [`report_path`] settled, and says where on stderr.
pub(super) fn write_report(place: Option<ReportPlace>, run: &Decoded) -> anyhow::Result<()> {
    let Some(place) = place else {
        return Ok(());
    };
    let doc = run.doc;
    let page = crate::report::html::render(run)?;
    let path = match (place, doc.run_id) {
        (ReportPlace::File(path), _) => path,
        (ReportPlace::Folder(folder), Some(id)) => folder.join(format!("run-{id}.html")),
        // The run was to be stored and was not: nothing names its page.
        (ReportPlace::Folder(_), None) => return Ok(()),
    };
    crate::report::emit(page.as_bytes(), Some(&path)).with_context(|| match doc.run_id {
        Some(id) => format!(
            "run {id} is stored, and `ratelab results report {id} --out FILE` writes its page"
        ),
        None => "the run was not stored".to_string(),
    })?;
    crate::report::terminal::say("report: ", &path.display().to_string());
    Ok(())
}

/// `reports/` beside the results database.
fn reports_folder(output: &MeasureArgs) -> anyhow::Result<PathBuf> {
    Ok(Address::of(output.db.path.as_deref())?.reports_folder())
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_counts_double_up_to_all_cpus() {
        use super::thread_counts;
        assert_eq!(thread_counts(1), [1]);
        assert_eq!(thread_counts(2), [1, 2]);
        assert_eq!(thread_counts(6), [1, 2, 4, 6]);
        assert_eq!(thread_counts(64), [1, 2, 4, 8, 16, 32, 64]);
    }
}
