//! A cpu item as stored: one per test, thread count and class, with each thread's
//! figures inside, so scaling and placement can be read back from the database.

use serde::{Deserialize, Serialize};

use super::measure::ThreadFigures;

/// One test at one thread count in one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuItem {
    /// The test (`int`, `fma`, ...), stored as `op`.
    #[serde(rename = "op")]
    pub test: String,
    /// Threads that ran it at once.
    pub threads: usize,
    /// Their scheduling class as asked (`normal`, `idle`, `nice:5`).
    pub class: String,
    /// The instruction set the test used.
    pub isa: String,
    /// Loops per second of all threads together, the empty loop's time taken off, each
    /// thread timed on its own CPU clock, so that other work sharing its core takes
    /// nothing off; on the wall clock where the threads outnumber the cores they may
    /// run on, as they then share cores by design. Null when nothing is left of it (the
    /// empty test).
    pub loops_per_sec: Option<f64>,
    /// The same per second of wall time: what the threads got done while other work
    /// shared their cores; null as above, and in runs stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_loops_per_sec: Option<f64>,
    /// The same per thread (mean).
    pub loops_per_sec_per_thread: Option<f64>,
    /// Loops per second of all threads with the loop's own cost left in.
    pub raw_loops_per_sec: f64,
    /// Nanoseconds of one loop's work on one thread, the empty loop taken off (mean).
    pub work_ns_per_loop: f64,
    /// Nanoseconds of one pass of the empty loop on one thread (mean).
    pub empty_ns_per_loop: f64,
    /// Cores any thread was seen on.
    pub cpus_seen: Vec<usize>,
    /// Migrations seen, all threads together.
    pub migrations: u64,
    /// Seconds from the run's start to this test's start, on the group's clock.
    pub started_at_s: f64,
    /// Seconds the test ran.
    pub seconds: f64,
    /// Energy the package or system used during the test, where the machine says;
    /// null when it does not (the run's context says why).
    pub energy_j: Option<f64>,
    /// That energy over all threads' loops; null where energy is unknown.
    pub joules_per_loop: Option<f64>,
    /// Each thread's figures.
    pub per_thread: Vec<ThreadFigures>,
}

impl CpuItem {
    /// The item with no rate: what is left of the empty test's loop is noise, even where
    /// it comes to more than a tenth of the loop (a chunk's CPU clock slowed by the host).
    pub fn without_rate(self) -> CpuItem {
        CpuItem {
            loops_per_sec: None,
            wall_loops_per_sec: None,
            loops_per_sec_per_thread: None,
            ..self
        }
    }

    /// The item of `figures`, one per thread, of `test` at `class`; `crowded` where the
    /// threads outnumber the cores they may run on.
    #[allow(clippy::too_many_arguments)]
    pub fn of(
        test: &str,
        class: &str,
        isa: &str,
        figures: Vec<ThreadFigures>,
        started_at_s: f64,
        seconds: f64,
        energy_j: Option<f64>,
        crowded: bool,
    ) -> CpuItem {
        let all_loops: u64 = figures.iter().map(|f| f.loops).sum();
        let work_seconds: f64 = figures.iter().map(|f| f.work_seconds).sum();
        let busy_seconds: f64 = work_seconds + figures.iter().map(|f| f.empty_seconds).sum::<f64>();
        let walls: Option<Vec<f64>> = figures
            .iter()
            .map(ThreadFigures::wall_loops_per_sec)
            .collect();
        let threads = figures.len();
        let rates: Option<Vec<f64>> = figures.iter().map(ThreadFigures::loops_per_sec).collect();
        let wall_total = walls.map(|w| w.iter().sum::<f64>());
        let total = if crowded {
            wall_total
        } else {
            rates.map(|r| r.iter().sum::<f64>())
        };
        let mean = |f: &dyn Fn(&ThreadFigures) -> f64| {
            figures.iter().map(f).sum::<f64>() / threads.max(1) as f64
        };
        let per_loop = |seconds: f64, loops: u64| {
            if loops > 0 {
                seconds * 1e9 / loops as f64
            } else {
                0.0
            }
        };
        let mut cpus_seen: Vec<usize> = figures.iter().flat_map(|f| f.cpus_seen.clone()).collect();
        cpus_seen.sort_unstable();
        cpus_seen.dedup();
        CpuItem {
            test: test.to_string(),
            threads,
            class: class.to_string(),
            isa: isa.to_string(),
            loops_per_sec: total,
            wall_loops_per_sec: wall_total,
            loops_per_sec_per_thread: total.map(|t| t / threads.max(1) as f64),
            raw_loops_per_sec: figures.iter().map(ThreadFigures::raw_loops_per_sec).sum(),
            work_ns_per_loop: mean(&|f| per_loop(f.corrected_seconds(), f.loops)),
            empty_ns_per_loop: mean(&|f| f.empty_seconds_per_loop() * 1e9),
            cpus_seen,
            migrations: figures.iter().map(|f| f.migrations).sum(),
            started_at_s,
            seconds,
            energy_j,
            // The energy covers the empty chunks too: only the work's share is the loops'.
            joules_per_loop: energy_j
                .filter(|_| all_loops > 0 && busy_seconds > 0.0)
                .map(|j| j * work_seconds / busy_seconds / all_loops as f64),
            per_thread: figures,
        }
    }
}
