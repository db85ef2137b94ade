//! How ratelab summarises, judges and shows a stored scale run: the median time at each
//! CPU count, the speedup over the fewest CPUs, efficiency, throughput, and the failures.

use crate::workload::Stored;
use serde::Serialize;
use serde_json::{Value, json};

use super::ScaleItem;
use crate::analysis::fits::{fits_sentence, fits_summary};
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict, WorkloadRecord};
use crate::vocab::units::{format_rate, format_seconds};
use crate::vocab::{Chart, Table};

/// Speedup at the most CPUs under which a command is said not to scale.
const NO_SCALING: f64 = 1.2;

/// One CPU count's runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
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

fn items(record: &WorkloadRecord) -> Vec<ScaleItem> {
    record
        .items
        .iter()
        .filter_map(|i| serde_json::from_value(i.clone()).ok())
        .collect()
}

/// The points of a record, fewest CPUs first.
pub fn points(record: &WorkloadRecord) -> Vec<ScalePoint> {
    let items = items(record);
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

impl crate::workload::Kind for ScaleKind {
    const NAME: &'static str = "scale";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        // Every run is a point of rate (runs per second) against CPUs.
        let runs: Vec<(f64, f64)> = items(record)
            .iter()
            .filter(|i| i.seconds > 0.0)
            .map(|i| (i.cpus as f64, 1.0 / i.seconds))
            .collect();
        let mut summary = fits_summary(&runs);
        summary.insert("points".into(), json!(points(record)));
        Value::Object(summary)
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        let verdict = Verdict::about(Some(workload));
        let mut out = Vec::new();
        let failed = items(record)
            .iter()
            .filter(|i| i.exit_code != Some(0))
            .count();
        if failed > 0 {
            out.push(verdict(
                "command_failed",
                Severity::Warning,
                format!(
                    "{failed} runs of `{}` did not exit 0: their times may not be of the whole work",
                    record.target
                ),
            ));
        }
        if let Some(sentence) = fits_sentence(&self.summarize(w)) {
            out.push(verdict("scaling_law", Severity::Info, sentence));
        }
        let points = points(record);
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
                    "`{}` ran {:.2}x faster on {} CPUs than on {} ({:.0}% efficiency): {words}",
                    record.target,
                    last.speedup,
                    last.cpus,
                    first.cpus,
                    last.efficiency * 100.0
                ),
            ));
        }
        out
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        super::charts::chart(&w.record.summary, &w.record.target)
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        let limit = match record.params["limit"].as_str() {
            Some("quota") => "a CFS quota of n CPUs (--vcpus)",
            _ => "affinity to the first n CPUs",
        };
        vec![Table {
            title: format!("`{}` held by {limit}", record.target),
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
            rows: points(record)
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
