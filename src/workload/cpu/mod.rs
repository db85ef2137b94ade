//! In-core loop tests: kernels of known work at 1..N threads, in scheduling classes and
//! on the cores asked for, each corrected by its empty loop. Results per test, thread
//! count and class, with the cores each thread ran on, are items; scaling and the share
//! of a baseline run are worked out from them by the kind.

mod brief;
mod charts;
mod class;
mod context;
mod item;
pub mod kernels;
mod kind;
mod measure;
mod physics;
mod scaling;
mod tables;
mod view;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use class::SchedClass;
pub use context::{CpuContext, LoopOfTest, PowerSource, UnavailableTest};
pub use item::CpuItem;
pub use kind::{CpuKind, CpuSummary};
pub use measure::{Budget, ThreadFigures};
pub use scaling::{Scaling, ScalingPoint};

use self::measure::Placement;
use crate::error::Error;
use crate::platform::cores;
use crate::sensors::power::Power;
use crate::workload::{Context, Kind, Workload};

/// Rates of an earlier run to compare with (`--baseline`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The run the rates come from.
    pub run_id: i64,
    /// The cores its threads were kept on; all when null. Only runs on the same cores
    /// are compared.
    #[serde(default)]
    pub cpus: Option<Vec<usize>>,
    /// Its items: test, threads, class and loops per second.
    pub rates: Vec<BaselineRate>,
    /// Whether other work on the machine disturbed it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disturbed: bool,
}

/// One rate of a baseline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRate {
    /// The test, stored as `op`.
    #[serde(rename = "op")]
    pub test: String,
    /// Threads.
    pub threads: usize,
    /// Class.
    pub class: String,
    /// Its loops per second.
    pub loops_per_sec: f64,
}

/// What `ratelab cpu` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuPlan {
    /// Tests in the order they run.
    pub tests: Vec<String>,
    /// Thread counts, each run in turn.
    pub threads: Vec<usize>,
    /// Scheduling classes, each run in turn.
    pub classes: Vec<SchedClass>,
    /// Cores the threads may run on; all when null.
    pub cpus: Option<Vec<usize>>,
    /// How long or how much each thread works per test.
    pub budget: Budget,
    /// The run compared with, if any.
    pub baseline: Option<Baseline>,
}

impl CpuPlan {
    /// How many CPUs its threads may use: its `cpus`, else every online CPU.
    pub fn usable_cpus(&self) -> usize {
        self.cpus
            .as_ref()
            .map_or_else(|| cores::online_cpus().len(), Vec::len)
    }

    /// A warning where more threads are asked for than the CPUs they may use: they will
    /// take turns, and those figures say nothing of that many cores.
    pub fn crowding(&self) -> Option<String> {
        let most = *self.threads.iter().max()?;
        let (count, which) = match &self.cpus {
            Some(cpus) => (
                cpus.len(),
                format!(
                    "{} {}",
                    if cpus.len() == 1 { "cpu" } else { "cpus" },
                    cpus.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            ),
            None => (self.usable_cpus(), "every online CPU".to_string()),
        };
        (most > count).then(|| {
            format!(
                "{most} threads on {count} CPU{} this process may use ({which}): they will \
                 take turns, and those figures say nothing of {most} cores",
                if count == 1 { "" } else { "s" }
            )
        })
    }
}

/// The cpu workload.
pub struct CpuWorkload {
    plan: CpuPlan,
    unavailable: Vec<(String, String)>,
    done: Option<Arc<AtomicBool>>,
    power: Result<Power, String>,
}

impl CpuWorkload {
    /// A workload for `plan`.
    pub fn new(plan: CpuPlan) -> CpuWorkload {
        CpuWorkload {
            plan,
            unavailable: Vec::new(),
            done: None,
            power: Err("not probed yet".into()),
        }
    }

    /// Sets `flag` when the tests end, so a monitor beside them knows to stop.
    pub fn signal_when_done(mut self, flag: Arc<AtomicBool>) -> CpuWorkload {
        self.done = Some(flag);
        self
    }
}

impl Workload for CpuWorkload {
    fn kind(&self) -> &'static str {
        CpuKind::NAME
    }

    fn target(&self) -> String {
        match &self.plan.cpus {
            Some(cpus) => format!(
                "cpus {}",
                cpus.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None => "all cpus".into(),
        }
    }

    fn params(&self) -> Value {
        serde_json::to_value(&self.plan).expect("plans serialise")
    }

    fn context(&self) -> Value {
        serde_json::to_value(self.stored_context()).expect("contexts serialise")
    }

    fn prepare(&mut self) -> Result<(), Error> {
        for class in &self.plan.classes {
            class.permitted().map_err(Error::Unsupported)?;
        }
        self.power = Power::probe();
        for test in &self.plan.tests {
            let kernel = kernels::kernel(test)
                .ok_or_else(|| Error::Input(format!("no test named \"{test}\" for --test")))?;
            if let Some(reason) = kernel.unavailable() {
                self.unavailable.push((test.clone(), reason));
            } else if let Err(reason) = kernel.permit() {
                self.unavailable.push((test.clone(), reason));
            }
        }
        Ok(())
    }

    fn run(&mut self, ctx: &Context) -> Result<(), Error> {
        let start = Instant::now();
        let result = self.run_tests(ctx, start);
        if let Some(done) = &self.done {
            done.store(true, Ordering::Relaxed);
        }
        result
    }
}

impl CpuWorkload {
    /// What the run says of the machine beside its items.
    fn stored_context(&self) -> CpuContext {
        CpuContext {
            core_types: cores::core_types(),
            unavailable: self
                .unavailable
                .iter()
                .map(|(test, reason)| UnavailableTest {
                    test: test.clone(),
                    reason: reason.clone(),
                })
                .collect(),
            power: Some(match &self.power {
                Ok(power) => PowerSource::Fed(power.source()),
                Err(reason) => PowerSource::Unavailable {
                    unavailable: reason.clone(),
                },
            }),
            loops: self
                .plan
                .tests
                .iter()
                .filter_map(|t| kernels::kernel(t))
                .map(|k| LoopOfTest {
                    test: k.name().into(),
                    loop_is: k.loop_is().into(),
                })
                .collect(),
        }
    }

    fn run_tests(&mut self, ctx: &Context, start: Instant) -> Result<(), Error> {
        // Threads past these take turns: their rate is what they did in wall time.
        let usable = self.plan.usable_cpus();
        for class in &self.plan.classes {
            for test in &self.plan.tests {
                if self.unavailable.iter().any(|(t, _)| t == test) {
                    continue;
                }
                let kernel = kernels::kernel(test).expect("checked in prepare");
                for &threads in &self.plan.threads {
                    if ctx.cancel.is_set() {
                        return Err(Error::Interrupted);
                    }
                    ctx.sink
                        .status(format!("{test} on {threads} threads, {class}"));
                    let placement = Placement {
                        threads,
                        class: *class,
                        cpus: self.plan.cpus.clone(),
                    };
                    let began = start.elapsed().as_secs_f64();
                    // Energy counters run on: a reading now closes the interval before.
                    if let Ok(power) = &mut self.power {
                        power.sample();
                    }
                    let figures = measure::measure(kernel, &placement, self.plan.budget, &|| {
                        ctx.cancel.is_set()
                    })
                    .map_err(|reason| {
                        if reason.contains("--class")
                            || reason.contains("--cpus")
                            || reason.contains("cannot start")
                        {
                            Error::Unsupported(reason)
                        } else {
                            Error::Input(reason)
                        }
                    })?;
                    if ctx.cancel.is_set() {
                        return Err(Error::Interrupted);
                    }
                    let seconds = start.elapsed().as_secs_f64() - began;
                    let energy_j = match &mut self.power {
                        Ok(power) => {
                            let reading = power.sample();
                            reading.energy_j.or(reading.power_w.map(|w| w * seconds))
                        }
                        Err(_) => None,
                    };
                    let isa = kernel.runner().isa();
                    let item = CpuItem::of(
                        test,
                        &class.to_string(),
                        isa,
                        figures,
                        began,
                        seconds,
                        energy_j,
                        threads > usable,
                    );
                    // A loop without work has no rate, however its chunks' clocks drift.
                    let item = if kernel.has_work() {
                        item
                    } else {
                        item.without_rate()
                    };
                    ctx.sink.progress().add(0);
                    ctx.sink.item(&item);
                }
                ctx.sink.stage_done(format!("{test} {class}"));
            }
        }
        Ok(())
    }
}
