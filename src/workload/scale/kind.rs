//! How ratelab summarises, judges and shows a stored scale run: the median time at each
//! CPU count, the speedup over the fewest CPUs, efficiency, throughput, and the failures.

use serde::{Deserialize, Serialize};

use super::{Limit, ScaleContext, ScaleItem, ScalePlan, charts};
use crate::analysis::fits::FitsSummary;
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict};
use crate::vocab::units::{format_rate, format_seconds, format_speedup};
use crate::vocab::{Chart, Table};
use crate::workload::{Kind, Stored};

/// Speedup at the most CPUs under which a command is said not to scale.
const NO_SCALING: f64 = 1.2;
/// How far the CPU time of the same command may move, between runs at one count
/// ((max - min) / median) or from the fewest CPUs to another (median over median),
/// before its CPUs are said not to have kept one speed.
const CPU_TIME_MOVED: f64 = 0.15;
/// The least share of its wall time a command spends on a CPU for its CPU time to
/// stand for its work.
const CPU_BOUND: f64 = 0.5;

/// One CPU count's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalePoint {
    /// CPUs.
    pub cpus: usize,
    /// Median wall seconds of its runs.
    pub seconds: f64,
    /// Fastest and slowest.
    pub min_seconds: f64,
    /// Slowest.
    pub max_seconds: f64,
    /// Median time at the fewest CPUs over this one's.
    pub speedup: f64,
    /// Speedup per CPU added, relative to the fewest CPUs.
    pub efficiency: f64,
    /// Median bytes per second, with `--bytes`.
    pub bytes_per_sec: Option<f64>,
    /// Runs.
    pub runs: usize,
}

/// The summary of a scale workload as stored: the scaling laws fitted to every run's
/// rate (runs per second) against CPUs, and the runs at each CPU count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleSummary {
    /// The scaling laws fitted to every run's rate against CPUs.
    #[serde(flatten)]
    pub fits: FitsSummary,
    /// Each CPU count's runs, fewest CPUs first.
    pub points: Vec<ScalePoint>,
}

/// The points of `items`, fewest CPUs first.
pub fn points(items: &[ScaleItem]) -> Vec<ScalePoint> {
    let mut counts: Vec<usize> = items.iter().map(|i| i.cpus).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut out: Vec<ScalePoint> = Vec::new();
    for cpus in counts {
        let times: Vec<f64> = items
            .iter()
            .filter(|i| i.cpus == cpus)
            .map(|i| i.seconds)
            .collect();
        let Some(stats) = Stats::of(&times) else {
            continue;
        };
        let rates: Vec<f64> = items
            .iter()
            .filter(|i| i.cpus == cpus)
            .filter_map(|i| i.bytes_per_sec)
            .collect();
        let (first_cpus, first_seconds) = out
            .first()
            .map_or((cpus, stats.median), |p| (p.cpus, p.seconds));
        let speedup = first_seconds / stats.median;
        out.push(ScalePoint {
            cpus,
            seconds: stats.median,
            min_seconds: stats.min,
            max_seconds: stats.max,
            speedup,
            efficiency: speedup * first_cpus as f64 / cpus as f64,
            bytes_per_sec: Stats::of(&rates).map(|s| s.median),
            runs: stats.n,
        });
    }
    out
}

/// CPU seconds (user and system) of each run at `cpus`.
fn cpu_seconds(items: &[ScaleItem], cpus: usize) -> Option<Stats> {
    let cpu: Vec<f64> = items
        .iter()
        .filter(|i| i.cpus == cpus)
        .map(|i| i.user_seconds + i.system_seconds)
        .collect();
    Stats::of(&cpu)
}

/// Where the same command's CPU time moved: between runs at one count, or from the
/// fewest CPUs to more, in words; `None` where it kept still or the command is not
/// CPU-bound (its CPU time then says little of its work).
fn cpu_time_moved(items: &[ScaleItem], points: &[ScalePoint]) -> Option<String> {
    let first = points.first()?;
    let base = cpu_seconds(items, first.cpus)?;
    if base.median < CPU_BOUND * first.seconds {
        return None;
    }
    let mut moved = Vec::new();
    for point in points {
        let cpu = cpu_seconds(items, point.cpus)?;
        if cpu.n > 1 && cpu.max - cpu.min > CPU_TIME_MOVED * cpu.median {
            moved.push(format!(
                "{}-{} of CPU time from run to run at {} CPU{}",
                format_seconds(cpu.min),
                format_seconds(cpu.max),
                point.cpus,
                if point.cpus == 1 { "" } else { "s" }
            ));
        }
        if point.cpus != first.cpus && cpu.median > (1.0 + CPU_TIME_MOVED) * base.median {
            moved.push(format!(
                "{:.2}x the CPU time at {} CPUs that it took at {}",
                cpu.median / base.median,
                point.cpus,
                first.cpus
            ));
        }
    }
    (!moved.is_empty()).then(|| moved.join(", and "))
}

/// How ratelab summarises, judges and shows stored scale workloads.
pub struct ScaleKind;

impl Kind for ScaleKind {
    const NAME: &'static str = "scale";
    type Params = ScalePlan;
    type Context = ScaleContext;
    type Item = ScaleItem;
    type Summary = ScaleSummary;

    fn summarize(&self, w: &Stored<Self>) -> ScaleSummary {
        // Every run is a point of rate (runs per second) against CPUs.
        let runs: Vec<(f64, f64)> = w
            .items
            .iter()
            .filter(|i| i.seconds > 0.0)
            .map(|i| (i.cpus as f64, 1.0 / i.seconds))
            .collect();
        ScaleSummary {
            fits: FitsSummary::of(&runs),
            points: points(&w.items),
        }
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let target = &w.record.target;
        let verdict = Verdict::about(Some(w.index()));
        let mut out = Vec::new();
        let failed = w.items.iter().filter(|i| i.exit_code != Some(0)).count();
        if failed > 0 {
            out.push(verdict(
                "command_failed",
                Severity::Warning,
                format!(
                    "{failed} runs of `{target}` did not exit 0: their times may not be of the whole work"
                ),
            ));
        }
        if let Some(sentence) = self
            .summarize(w)
            .fits
            .sentence(&|runs| format!("{runs:.3} runs/s"))
        {
            out.push(verdict("scaling_law", Severity::Info, sentence));
        }
        let points = points(&w.items);
        if let Some(moved) = cpu_time_moved(&w.items, &points) {
            out.push(verdict(
                "cpu_time_moved",
                Severity::Warning,
                format!(
                    "the same work took {moved}: its CPUs did not keep one speed (a host's other guests, cores or hyperthreads shared with other work, a clock that moves with how many cores are busy) or its work was not the same each run, so its times and speedups carry that spread"
                ),
            ));
        }
        if let (Some(first), Some(last)) = (points.first(), points.last())
            && last.cpus > first.cpus
        {
            let (code, words) = if last.speedup < NO_SCALING {
                (
                    "does_not_scale",
                    "it does not use more CPUs: something else sets its pace (one thread, waiting, I/O)",
                )
            } else {
                ("scales", "more CPUs shorten it")
            };
            out.push(verdict(
                code,
                Severity::Info,
                format!(
                    "`{target}` ran {} on {} CPUs than on {} ({:.0}% efficiency): {words}",
                    format_speedup(last.speedup),
                    last.cpus,
                    first.cpus,
                    last.efficiency * 100.0
                ),
            ));
        }
        out
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        w.summary
            .as_ref()
            .and_then(|summary| charts::chart(summary, &w.record.target))
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let limit = match w.params.limit {
            Limit::Quota => "a CFS quota of n CPUs (--vcpus)",
            Limit::Affinity => "affinity to the first n CPUs",
        };
        vec![Table {
            title: format!("`{}` held by {limit}", w.record.target),
            header: [
                "cpus",
                "runs",
                "median",
                "min",
                "max",
                "speedup",
                "efficiency",
                "throughput",
            ]
            .map(String::from)
            .to_vec(),
            rows: points(&w.items)
                .into_iter()
                .map(|p| {
                    vec![
                        p.cpus.to_string(),
                        p.runs.to_string(),
                        format_seconds(p.seconds),
                        format_seconds(p.min_seconds),
                        format_seconds(p.max_seconds),
                        format!("{:.2}x", p.speedup),
                        format!("{:.0}%", p.efficiency * 100.0),
                        p.bytes_per_sec.map_or("-".into(), format_rate),
                    ]
                })
                .collect(),
            numeric: vec![0, 1, 2, 3, 4, 5, 6, 7],
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run at `cpus` of `seconds` wall time and `cpu` seconds of CPU time.
    fn run(cpus: usize, seconds: f64, cpu: f64) -> ScaleItem {
        ScaleItem {
            op: "run".into(),
            cpus,
            repeat: 0,
            seconds,
            user_seconds: cpu,
            system_seconds: 0.0,
            exit_code: Some(0),
            bytes_per_sec: None,
        }
    }

    fn moved(items: &[ScaleItem]) -> Option<String> {
        cpu_time_moved(items, &points(items))
    }

    #[test]
    fn steady_cpus_say_nothing_and_moving_ones_are_named() {
        let steady = [
            run(1, 1.0, 1.0),
            run(1, 1.02, 1.01),
            run(2, 0.5, 1.0),
            run(2, 0.52, 1.03),
        ];
        assert_eq!(moved(&steady), None);
        // From run to run at one count: the host slowed some runs.
        let unsteady = [
            run(1, 0.75, 0.75),
            run(1, 0.85, 0.85),
            run(1, 0.76, 0.76),
            run(2, 0.42, 0.83),
            run(2, 0.65, 1.26),
            run(2, 0.49, 0.89),
        ];
        let words = moved(&unsteady).unwrap();
        assert!(
            words.contains("at 2 CPUs") && !words.contains("at 1 CPU,"),
            "{words}"
        );
        // From one CPU to two: each CPU did less when both were busy.
        let shared = [
            run(1, 1.0, 1.0),
            run(1, 1.0, 1.0),
            run(2, 0.7, 1.4),
            run(2, 0.7, 1.4),
        ];
        let words = moved(&shared).unwrap();
        assert!(words.contains("1.40x the CPU time at 2 CPUs"), "{words}");
    }

    #[test]
    fn a_command_off_its_cpus_is_not_judged_by_its_cpu_time() {
        let sleeper = [
            run(1, 0.3, 0.001),
            run(1, 0.3, 0.003),
            run(2, 0.3, 0.001),
            run(2, 0.3, 0.004),
        ];
        assert_eq!(moved(&sleeper), None);
    }
}
