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
