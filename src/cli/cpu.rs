//! `ratelab cpu`: in-core loop tests at 1..N threads, by class and affinity.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;

use super::MeasureArgs;
use super::values::{CountList, parse_count_list, parse_seconds};
use crate::db::{Address, RunQuery, Store};
use crate::document::RunStatus;
use crate::exit::{Exit, UsageError};
use crate::platform::cores;
use crate::run::{DEFAULT_INTERVAL, Schedule};
use crate::workload::cpu::kernels::{self, DEFAULT_TESTS};
use crate::workload::cpu::{
    Baseline, BaselineRate, Budget, CpuKind, CpuPlan, CpuWorkload, SchedClass,
};
use crate::workload::monitor::{MonitorPlan, MonitorWorkload};
use crate::workload::{At, Kind, Stored, Workload};

/// Options of `ratelab cpu`.
#[derive(Debug, Args)]
#[command(after_long_help = "Tests (one loop of each):\n  \
int     4 dependent 64-bit multiply-adds (assembly)\n  \
fma     8 independent 8-wide f32 FMAs (assembly, AVX2+FMA)\n  \
dot     a 1024-element f32 dot product (the widest of AVX-512, AVX2, SSE2, scalar)\n  \
matmul  a 16x16 f32 matrix multiply (AVX-512, AVX2 or scalar)\n  \
spmv    a CSR sparse matrix (4096 rows of 16) times a vector\n  \
amx     4 AMX bf16 tile products (where the CPU has AMX)\n  \
empty   the loop alone: checks the correction, reports near zero\n\n\
Each thread alternates about a millisecond of work with the empty loop of the same \
length, and the empty loop's time is taken off. Threads start together on a barrier; \
between chunks each notes the core it is on, which gives the cores seen and the \
migrations. Rates are compared with a baseline run: --baseline, or the first run with \
cpu tests stored for this machine.")]
pub struct CpuArgs {
    /// Tests to run, comma-separated [default: int,fma,dot,matmul,spmv,amx].
    #[arg(long = "test", value_name = "LIST", value_delimiter = ',')]
    pub tests: Vec<String>,
    /// Thread counts: 1..4 or 1,2,4 [default: 1..(the CPUs it may use)].
    #[arg(long, value_name = "RANGE", value_parser = parse_count_list)]
    pub threads: Option<CountList>,
    /// Scheduling classes, comma-separated: normal, batch, idle, nice:N.
    #[arg(long = "class", value_name = "LIST", value_delimiter = ',', default_value = "normal", value_parser = SchedClass::parse)]
    pub classes: Vec<SchedClass>,
    /// Cores the threads may run on: 1, 0-3, 0,2.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Loops each thread runs per test, instead of --seconds.
    #[arg(long, value_name = "N", conflicts_with = "seconds")]
    pub loops: Option<u64>,
    /// Seconds each thread works per test (10s, 500ms, or a bare number).
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_seconds)]
    pub seconds: Duration,
    /// A stored run to compare with [default: the first cpu run of this machine].
    #[arg(long, value_name = "RUN_ID")]
    pub baseline: Option<i64>,
    /// Output and storage options.
    #[command(flatten)]
    pub output: MeasureArgs,
}

/// Runs `ratelab cpu`.
pub fn run(args: CpuArgs) -> anyhow::Result<Exit> {
    let plan = args.plan()?;
    if !args.output.quiet
        && let Some(words) = plan.crowding()
    {
        crate::report::terminal::say("ratelab: warning: ", &words);
    }
    // The monitor samples residency, frequency, power and where ratelab's own threads
    // run, beside the tests, until they end.
    let done = Arc::new(AtomicBool::new(false));
    // Not shorter than the 10 ms tick /proc/stat counts residency in.
    let interval = args.output.interval.unwrap_or(DEFAULT_INTERVAL);
    let mut monitor = MonitorPlan::every(interval.max(Duration::from_millis(10)));
    monitor.pid = Some(std::process::id());
    let workloads: Vec<Box<dyn Workload>> = vec![
        Box::new(CpuWorkload::new(plan).signal_when_done(Arc::clone(&done))),
        Box::new(MonitorWorkload::new(monitor).until(done)),
    ];
    super::measure("cpu", &args.output, workloads, Schedule::together(2, &[]))
}

impl CpuArgs {
    /// The validated plan.
    pub fn plan(&self) -> anyhow::Result<CpuPlan> {
        let tests: Vec<String> = if self.tests.is_empty() {
            DEFAULT_TESTS.iter().map(|t| t.to_string()).collect()
        } else {
            self.tests.clone()
        };
        for test in &tests {
            if kernels::kernel(test).is_none() {
                let known: Vec<&str> = kernels::KERNELS.iter().map(|k| k.name()).collect();
                return Err(UsageError(format!(
                    "no test named \"{test}\" for --test (tests: {})",
                    known.join(", ")
                ))
                .into());
            }
        }
        let online = cores::online_cpus();
        let cpus = match &self.cpus {
            Some(text) => {
                let list = cores::parse_list(&text.replace("..", "-"))
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| {
                        UsageError(format!("invalid --cpus \"{text}\" (such as 1, 0-3 or 0,2)"))
                    })?;
                if let Some(bad) = list.iter().find(|c| !online.contains(c)) {
                    return Err(UsageError(format!(
                        "--cpus {text}: cpu {bad} is not online (online: {})",
                        online
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    ))
                    .into());
                }
                Some(list)
            }
            // Under taskset or a cpuset, the CPUs it left this process.
            None => cores::inherited_cpus(),
        };
        let usable = cpus.as_ref().map_or(online.len(), Vec::len).max(1);
        let threads = match &self.threads {
            Some(threads) => threads.0.clone(),
            None => (1..=usable).collect(),
        };
        if let Some(bad) = threads.iter().find(|&&t| t == 0 || t > 4096) {
            return Err(UsageError(format!("--threads {bad} is out of range (1 to 4096)")).into());
        }
        let budget = match self.loops {
            Some(0) => {
                return Err(UsageError("--loops 0 runs nothing: give 1 or more".into()).into());
            }
            Some(loops) => Budget::Loops(loops),
            None if self.seconds < Duration::from_millis(10) => {
                return Err(UsageError(format!(
                    "--seconds {} is too short to time: give 10ms or more",
                    humantime::format_duration(self.seconds)
                ))
                .into());
            }
            None => Budget::Seconds(self.seconds.as_secs_f64()),
        };
        let baseline = baseline(&self.output, self.baseline, &cpus)?;
        Ok(CpuPlan {
            tests,
            threads,
            classes: self.classes.clone(),
            cpus,
            budget,
            baseline,
        })
    }
}

/// The cpu rates stored in run `run_id`, and the cores they ran on; `None` when the run
/// has no cpu tests.
fn rates_of(store: &Store, run_id: i64) -> anyhow::Result<Option<Baseline>> {
    let doc = store.load_run(run_id)?;
    let Some(index) = doc.workloads.iter().position(|w| w.kind == CpuKind::NAME) else {
        return Ok(None);
    };
    let workload = Stored::<CpuKind>::decode(At::new(&doc, index))?;
    let rates: Vec<BaselineRate> = workload
        .items
        .into_iter()
        .filter_map(|i| {
            Some(BaselineRate {
                loops_per_sec: i.loops_per_sec?,
                test: i.test,
                threads: i.threads,
                class: i.class,
            })
        })
        .collect();
    Ok((!rates.is_empty()).then_some(Baseline {
        run_id,
        cpus: workload.params.cpus,
        rates,
        disturbed: crate::analysis::interference::disturbed(&doc),
    }))
}

/// The rates of the run to compare with: the one asked for (an error when it has no cpu
/// tests), or the first run with cpu tests stored for this machine, or none.
fn baseline(
    output: &MeasureArgs,
    asked: Option<i64>,
    cpus: &Option<Vec<usize>>,
) -> anyhow::Result<Option<Baseline>> {
    // With --no-store no database is opened, unless --baseline asks to read one.
    if output.no_store && asked.is_none() {
        return Ok(None);
    }
    let at = Address::of(output.db.path.as_deref())?;
    if !at.exists() {
        return match asked {
            Some(id) => {
                Err(UsageError(format!("--baseline {id}: no results database at {at}")).into())
            }
            None => Ok(None),
        };
    }
    let store = at.open_to_read()?;
    let cores = |cpus: &Option<Vec<usize>>| match cpus {
        Some(list) => format!("cpus {list:?}"),
        None => "all cpus".to_string(),
    };
    if let Some(id) = asked {
        return match rates_of(&store, id) {
            Ok(Some(baseline)) if &baseline.cpus != cpus => Err(UsageError(format!(
                "--baseline {id}: run {id} ran on {}, this run on {}: give the same --cpus",
                cores(&baseline.cpus),
                cores(cpus)
            ))
            .into()),
            Ok(Some(baseline)) => Ok(Some(baseline)),
            Ok(None) => {
                Err(UsageError(format!("--baseline {id}: run {id} has no cpu tests")).into())
            }
            Err(e) => Err(UsageError(format!("--baseline {id}: {e:#}")).into()),
        };
    }
    // The first complete run of cpu tests on this machine that nothing disturbed.
    let query = RunQuery {
        hostname: Some(crate::platform::probe_machine().hostname),
        kind: Some(CpuKind::NAME.into()),
        status: Some(RunStatus::Complete),
        oldest_first: true,
        ..RunQuery::default()
    };
    for run in store.find_runs(&query)? {
        match rates_of(&store, run.run_id) {
            // A run other work disturbed is no measure of this machine.
            Ok(Some(baseline)) if &baseline.cpus == cpus && !baseline.disturbed => {
                return Ok(Some(baseline));
            }
            Ok(_) => {}
            // A run that no longer reads is no baseline; this run goes on without it.
            Err(e) => crate::report::terminal::say(
                "ratelab: warning: ",
                &format!("run {} is left out as a baseline: {e:#}", run.run_id),
            ),
        }
    }
    Ok(None)
}
