//! What a stored scale workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use serde::{Deserialize, Serialize};

use super::{ScaleContext, ScaleItem, ScalePlan};
use crate::analysis::fits::FitsSummary;
use crate::analysis::stats::Stats;
use crate::workload::{Decoded, Kind, Stored};

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

/// The scale kind: its stored shapes and what a run concludes from them.
pub struct ScaleKind;

impl Kind for ScaleKind {
    const NAME: &'static str = "scale";
    type Params = ScalePlan;
    type Context = ScaleContext;
    type Item = ScaleItem;
    type Summary = ScaleSummary;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> ScaleSummary {
        summary_of(&w.items)
    }
}

/// The summary of `items`: the fits of rate (runs per second) against CPUs, and each
/// CPU count's point.
pub(super) fn summary_of(items: &[ScaleItem]) -> ScaleSummary {
    // Every run is a point of rate (runs per second) against CPUs.
    let runs: Vec<(f64, f64)> = items
        .iter()
        .filter(|i| i.seconds > 0.0)
        .map(|i| (i.cpus as f64, 1.0 / i.seconds))
        .collect();
    ScaleSummary {
        fits: FitsSummary::of(&runs),
        points: points(items),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::scale::ScaleOp;
    use crate::workload::scale::view::cpu_time_moved;

    /// A run at `cpus` of `seconds` wall time and `cpu` seconds of CPU time.
    fn run(cpus: usize, seconds: f64, cpu: f64) -> ScaleItem {
        ScaleItem {
            op: ScaleOp::Run,
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
