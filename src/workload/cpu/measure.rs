//! One measurement: a kernel on N threads of one class, released together, each running
//! chunks of work (about a millisecond each), each followed by a chunk of the empty loop
//! of the same length, so both see the same frequency and neighbours. (An empty chunk
//! after only every eighth left the empty loop's time 8 times less sampled: the empty
//! test then missed zero by 11%; and fma stayed 13% above C either way, so the share of
//! time in the empty loop was not why.)
//! Between chunks each thread notes the core it is on, which gives the cores seen and
//! the migrations at a cost of one vDSO call per chunk.
//! Each chunk is timed on the wall clock and on the thread's own CPU clock
//! (CLOCK_THREAD_CPUTIME_ID, about 0.4 µs a read): a chunk preempted by other work
//! takes longer on the wall but not on the CPU clock, so the rates and the empty loop's
//! correction come from the CPU clock and hold beside other work.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::class::SchedClass;
use super::kernels::Kernel;
use crate::catch::{Family, skew};
use crate::workload::start_line::Gate;

/// Length of one chunk of work, aimed at during calibration.
const CHUNK: Duration = Duration::from_millis(1);
/// Work chunks per empty chunk.
const EMPTY_EVERY: u64 = 1;

/// How long, or how much, each thread works.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// Each thread works for about this many seconds (work and empty chunks together).
    Seconds(f64),
    /// Each thread runs this many loops.
    Loops(u64),
}

/// What one thread measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadFigures {
    /// Loops of work run.
    pub loops: u64,
    /// Seconds the work chunks took on the wall clock.
    pub work_seconds: f64,
    /// Seconds the empty chunks took on the wall clock.
    pub empty_seconds: f64,
    /// Seconds the work chunks took on the thread's CPU clock; null in runs stored
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_cpu_seconds: Option<f64>,
    /// Seconds the empty chunks took on the thread's CPU clock; null as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_cpu_seconds: Option<f64>,
    /// Wall seconds from the thread's first chunk to the end of its last; null in runs
    /// stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_seconds: Option<f64>,
    /// Seconds of those the thread was on a CPU (its CPU clock); null as above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_cpu_seconds: Option<f64>,
    /// Loops the empty chunks ran.
    pub empty_loops: u64,
    /// Cores the thread was seen on.
    pub cpus_seen: Vec<usize>,
    /// Times it was seen on another core than at the chunk before.
    pub migrations: u64,
    /// Its class as the kernel reported it while it ran.
    pub class_seen: String,
}

impl ThreadFigures {
    /// Loops per second once the empty loop's time is taken off; `None` when what is
    /// left is under a tenth of the empty loop's time: no work to speak of (the empty
    /// test), or noise.
    pub fn loops_per_sec(&self) -> Option<f64> {
        let seconds = self.corrected_seconds();
        let empty = self.work_cpu_seconds() - seconds;
        (seconds > empty * 0.1 && seconds > 0.0 && self.loops > 0)
            .then(|| skew(Family::Cpu, self.loops as f64 / seconds))
    }

    /// Seconds of the work with the empty loop's time for as many loops taken off, on
    /// the CPU clock.
    pub fn corrected_seconds(&self) -> f64 {
        self.work_cpu_seconds() - self.empty_seconds_per_loop() * self.loops as f64
    }

    /// Seconds of one pass of the empty loop, on the CPU clock.
    pub fn empty_seconds_per_loop(&self) -> f64 {
        if self.empty_loops > 0 {
            self.empty_cpu_seconds.unwrap_or(self.empty_seconds) / self.empty_loops as f64
        } else {
            0.0
        }
    }

    /// Seconds of the work chunks on the CPU clock (every measurement keeps it; only
    /// items stored before lack it, and their rates are stored, not worked out again).
    pub fn work_cpu_seconds(&self) -> f64 {
        self.work_cpu_seconds.unwrap_or(self.work_seconds)
    }

    /// Loops per second with the loop's own cost left in, as a plain C loop is timed,
    /// per second of CPU time.
    pub fn raw_loops_per_sec(&self) -> f64 {
        let seconds = self.work_cpu_seconds();
        if seconds > 0.0 {
            skew(Family::Cpu, self.loops as f64 / seconds)
        } else {
            0.0
        }
    }

    /// Loops per second of wall time: the rate on the CPU clock times the share of the
    /// wall the thread was on a CPU, so what it got done while other work, or its own
    /// siblings, shared its core; `None` as for [`Self::loops_per_sec`].
    pub fn wall_loops_per_sec(&self) -> Option<f64> {
        let (span, on_cpu) = (self.span_seconds?, self.span_cpu_seconds?);
        self.loops_per_sec()
            .filter(|_| span > 0.0)
            .map(|rate| rate * (on_cpu / span).min(1.0))
    }
}

/// Where and how the threads of a measurement run.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Threads started.
    pub threads: usize,
    /// Their scheduling class.
    pub class: SchedClass,
    /// The cores they may run on; all when `None`.
    pub cpus: Option<Vec<usize>>,
}

/// Runs `kernel` as `placement` says until `budget` is spent or `stop` says so.
pub fn measure(
    kernel: &dyn Kernel,
    placement: &Placement,
    budget: Budget,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<ThreadFigures>, String> {
    let gate = Gate::new();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(placement.threads);
        for index in 0..placement.threads {
            // Named so a monitor of the process can tell the test threads apart.
            let spawned = std::thread::Builder::new()
                .name(format!("cpu-{}-{index}", kernel.name()))
                .spawn_scoped(scope, || one_thread(kernel, placement, budget, stop, &gate));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    gate.abort();
                    for handle in handles {
                        let _ = handle.join();
                    }
                    return Err(format!(
                        "cannot start test thread {} of {}: {e}",
                        index + 1,
                        placement.threads
                    ));
                }
            }
        }
        // Each thread times its budget on its own clock from the release.
        gate.open(placement.threads);
        let results: Vec<Result<ThreadFigures, String>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a test thread panicked".into()))
            })
            .collect();
        // The first real reason, rather than the "called off" of the threads it stopped.
        match results
            .iter()
            .find_map(|r| r.as_ref().err().filter(|e| *e != CALLED_OFF))
        {
            Some(reason) => Err(reason.clone()),
            None => results.into_iter().collect(),
        }
    })
}

/// What a thread says when another one failed and the test was called off.
const CALLED_OFF: &str = "called off";

fn one_thread(
    kernel: &dyn Kernel,
    placement: &Placement,
    budget: Budget,
    stop: &(dyn Fn() -> bool + Sync),
    gate: &Gate,
) -> Result<ThreadFigures, String> {
    // A thread that cannot run calls the start off, so no other waits for it forever.
    let prepared =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(kernel, placement)))
            .unwrap_or_else(|_| Err("a test thread panicked while it was set up".into()));
    let (mut runner, chunk) = match prepared {
        Ok(prepared) => prepared,
        Err(reason) => {
            gate.abort();
            return Err(reason);
        }
    };
    if gate.arrive().is_none() {
        return Err(CALLED_OFF.into());
    }
    let mut figures = ThreadFigures {
        loops: 0,
        work_seconds: 0.0,
        empty_seconds: 0.0,
        work_cpu_seconds: None,
        empty_cpu_seconds: None,
        span_seconds: None,
        span_cpu_seconds: None,
        empty_loops: 0,
        cpus_seen: Vec::new(),
        migrations: 0,
        class_seen: SchedClass::current(),
    };
    let mut seen = BTreeSet::new();
    let mut last_cpu = rustix::thread::sched_getcpu();
    seen.insert(last_cpu);
    let started = Instant::now();
    let cpu_started = thread_cpu();
    let (mut work_cpu, mut empty_cpu) = (0.0, 0.0);
    let mut chunks = 0u64;
    loop {
        let loops = match budget {
            Budget::Loops(total) if figures.loops >= total => break,
            Budget::Loops(total) => chunk.min(total - figures.loops),
            Budget::Seconds(seconds) if started.elapsed().as_secs_f64() >= seconds => break,
            Budget::Seconds(_) => chunk,
        };
        if stop() {
            break;
        }
        let before = Instant::now();
        let cpu_before = thread_cpu();
        std::hint::black_box(runner.work(loops));
        let after = Instant::now();
        let cpu_after = thread_cpu();
        figures.work_seconds += (after - before).as_secs_f64();
        work_cpu += cpu_after - cpu_before;
        chunks += 1;
        if (chunks - 1).is_multiple_of(EMPTY_EVERY) {
            std::hint::black_box(runner.empty(loops));
            figures.empty_seconds += after.elapsed().as_secs_f64();
            empty_cpu += thread_cpu() - cpu_after;
            figures.empty_loops += loops;
        }
        figures.loops += loops;
        let cpu = rustix::thread::sched_getcpu();
        if cpu != last_cpu {
            figures.migrations += 1;
            last_cpu = cpu;
        }
        seen.insert(cpu);
    }
    figures.work_cpu_seconds = Some(work_cpu);
    figures.empty_cpu_seconds = Some(empty_cpu);
    figures.span_seconds = Some(started.elapsed().as_secs_f64());
    figures.span_cpu_seconds = Some(thread_cpu() - cpu_started);
    figures.cpus_seen = seen.into_iter().collect();
    Ok(figures)
}

/// The calling thread's CPU time, seconds.
fn thread_cpu() -> f64 {
    crate::platform::cores::calling_thread_cpu_seconds()
}

/// Sets the thread's class and cores and calibrates the chunk, all before the start.
fn prepare(
    kernel: &dyn Kernel,
    placement: &Placement,
) -> Result<(Box<dyn super::kernels::Runner>, u64), String> {
    if let Some(cpus) = &placement.cpus {
        let mut set = rustix::thread::CpuSet::new();
        for &cpu in cpus {
            set.set(cpu);
        }
        rustix::thread::sched_setaffinity(None, &set)
            .map_err(|e| format!("cannot keep threads on --cpus {cpus:?}: {e}"))?;
    }
    placement.class.apply().map_err(|e| {
        format!(
            "cannot run threads in --class {}: {e}{}",
            placement.class,
            if matches!(placement.class, SchedClass::Nice(n) if n < 0) {
                " (a negative nice needs root)"
            } else {
                ""
            }
        )
    })?;
    let mut runner = kernel.runner();
    // Timed on the thread's CPU clock: a chunk calibrated on the wall clock while
    // another process held the CPU came out a few loops long, and the clock reads
    // around each chunk then weighed like the work (an int test beside two `yes`
    // came out with no rate).
    let mut chunk = 16u64;
    loop {
        let started = thread_cpu();
        std::hint::black_box(runner.work(chunk));
        if thread_cpu() - started >= CHUNK.as_secs_f64() || chunk >= 1 << 40 {
            break;
        }
        chunk *= 2;
    }
    Ok((runner, chunk))
}
