//! How ratelab summarises, judges and shows a stored cpu run: per test and class, the
//! rate at each thread count, its speedup and efficiency (and what each added thread
//! brought), the share of a baseline run, and where the threads ran.

use crate::workload::Stored;
use serde::Serialize;
use serde_json::{Value, json};

use super::item::{CpuItem, cpu_items};
use crate::analysis::fits::{ScalingFits, fit_scaling};
use crate::document::{Severity, Verdict, WorkloadRecord};
use crate::vocab::units::format_loops;
use crate::vocab::{Chart, GroupKey, RateUnit, Samples, Table};

/// Efficiency under which scaling is called out.
const POOR_SCALING: f64 = 0.75;
/// Share of the baseline under which a rate is called slower.
const SLOWER_THAN_BASELINE: f64 = 0.9;

/// One thread count of one test and class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingPoint {
    /// Threads.
    pub threads: usize,
    /// All threads' loops per second.
    pub loops_per_sec: f64,
    /// Per thread.
    pub loops_per_sec_per_thread: f64,
    /// Rate over the rate at the fewest threads measured, scaled to one thread.
    pub speedup: f64,
    /// Speedup over threads.
    pub efficiency: f64,
    /// What the threads added since the previous point brought, each, as a share of
    /// one thread's rate.
    pub added_thread_efficiency: Option<f64>,
    /// The rate as a share of the baseline run's, where it has one.
    pub share_of_baseline: Option<f64>,
}

/// The scaling of one test in one class: the shape the fits of rate against threads take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    /// The test.
    pub test: String,
    /// The class.
    pub class: String,
    /// One point per thread count, fewest first.
    pub points: Vec<ScalingPoint>,
    /// Scaling laws fitted to the rate against threads, with the best named.
    pub fits: Option<ScalingFits>,
    /// Why the laws could not be fitted, or tell each other apart.
    pub fit_warning: Option<String>,
}

fn baseline_rate(record: &WorkloadRecord, item: &CpuItem) -> Option<f64> {
    record.params["baseline"]["rates"]
        .as_array()?
        .iter()
        .find(|r| {
            r["op"] == item.op.as_str()
                && r["threads"] == item.threads
                && r["class"] == item.class.as_str()
        })?["loops_per_sec"]
        .as_f64()
}

/// The scaling of every test and class of a record.
pub fn scaling(record: &WorkloadRecord) -> Vec<Scaling> {
    let items = cpu_items(&record.items);
    let mut out: Vec<Scaling> = Vec::new();
    for item in &items {
        if out
            .iter()
            .any(|s| s.test == item.op && s.class == item.class)
        {
            continue;
        }
        let mut same: Vec<&CpuItem> = items
            .iter()
            .filter(|i| i.op == item.op && i.class == item.class && i.loops_per_sec.is_some())
            .collect();
        same.sort_by_key(|i| i.threads);
        let Some(first) = same.first() else { continue };
        let one_thread = first.loops_per_sec.unwrap_or(0.0) / first.threads as f64;
        let mut previous: Option<&CpuItem> = None;
        let points: Vec<ScalingPoint> = same
            .iter()
            .map(|i| {
                let rate = i.loops_per_sec.unwrap_or(0.0);
                let speedup = if one_thread > 0.0 {
                    rate / one_thread
                } else {
                    0.0
                };
                let added = previous.map(|p| {
                    (rate - p.loops_per_sec.unwrap_or(0.0))
                        / one_thread.max(f64::MIN_POSITIVE)
                        / (i.threads - p.threads).max(1) as f64
                });
                previous = Some(i);
                ScalingPoint {
                    threads: i.threads,
                    loops_per_sec: rate,
                    loops_per_sec_per_thread: rate / i.threads as f64,
                    speedup,
                    efficiency: speedup / i.threads as f64,
                    added_thread_efficiency: added,
                    share_of_baseline: baseline_rate(record, i).map(|b| rate / b),
                }
            })
            .collect();
        let rates: Vec<(f64, f64)> = points
            .iter()
            .map(|p: &ScalingPoint| (p.threads as f64, p.loops_per_sec))
            .collect();
        let fits = fit_scaling(&rates);
        out.push(Scaling {
            test: item.op.clone(),
            class: item.class.clone(),
            points,
            fit_warning: match &fits {
                Ok(f) => f.warning.as_ref().map(ToString::to_string),
                Err(e) => Some(e.to_string()),
            },
            fits: fits.ok(),
        });
    }
    out
}

/// How ratelab summarises, judges and shows stored cpu workloads.
pub struct CpuKind;

impl crate::workload::Kind for CpuKind {
    const NAME: &'static str = "cpu";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        json!({
            "scaling": scaling(record),
            "unavailable": record.context["unavailable"],
            "core_types": record.context["core_types"],
            "baseline_run_id": record.params["baseline"]["run_id"],
            "power": record.context["power"],
        })
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        let verdict = Verdict::about(Some(workload));
        let mut out = Vec::new();
        for missing in record.context["unavailable"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.push(verdict(
                "test_unavailable",
                Severity::Info,
                format!(
                    "{} is not available: {}",
                    missing["test"].as_str().unwrap_or("?"),
                    missing["reason"].as_str().unwrap_or("?")
                ),
            ));
        }
        for scaling in scaling(record) {
            let Some(last) = scaling.points.last().filter(|p| p.threads > 1) else {
                continue;
            };
            if last.efficiency < POOR_SCALING {
                out.push(verdict(
                    "poor_scaling",
                    Severity::Info,
                    format!(
                        "{} ({}) ran {:.2}x faster on {} threads than on one: {:.0}% of linear; \
                         the threads share a core or a unit, or were not all given a core",
                        scaling.test,
                        scaling.class,
                        last.speedup,
                        last.threads,
                        last.efficiency * 100.0
                    ),
                ));
            }
            for point in &scaling.points {
                if let Some(share) = point
                    .share_of_baseline
                    .filter(|s| *s < SLOWER_THAN_BASELINE)
                {
                    out.push(verdict(
                        "slower_than_baseline",
                        Severity::Warning,
                        format!(
                            "{} ({}, {} threads) ran at {:.0}% of run {}",
                            scaling.test,
                            scaling.class,
                            point.threads,
                            share * 100.0,
                            record.params["baseline"]["run_id"]
                        ),
                    ));
                }
            }
        }
        out
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        super::charts::chart(&w.record.summary)
            .filter(Chart::has_points)
            .into_iter()
            .collect()
    }

    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let items = cpu_items(&w.record.items)
            .into_iter()
            .filter_map(|item| {
                let key = GroupKey {
                    threads: Some(item.threads),
                    class: Some(item.class),
                    ..GroupKey::op(item.op)
                };
                Some((key, Some(item.loops_per_sec?)))
            })
            .collect();
        Some(Samples {
            unit: RateUnit::LoopsPerSec,
            items,
        })
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        let items = cpu_items(&record.items);
        let scalings = scaling(record);
        let has_baseline = !record.params["baseline"].is_null();
        let mut header: Vec<String> = [
            "test",
            "class",
            "threads",
            "loops/s",
            "per thread",
            "speedup",
            "efficiency",
            "ns/loop",
            "cpus seen",
            "migrations",
        ]
        .map(String::from)
        .to_vec();
        let has_energy = items.iter().any(|i| i.joules_per_loop.is_some());
        if has_energy {
            header.push("nJ/loop".into());
        }
        if has_baseline {
            header.push("of baseline".into());
        }
        let rows = items
            .iter()
            .map(|item| {
                let point = scalings
                    .iter()
                    .find(|s| s.test == item.op && s.class == item.class)
                    .and_then(|s| s.points.iter().find(|p| p.threads == item.threads));
                let mut row = vec![
                    format!("{} ({})", item.op, item.isa),
                    item.class.clone(),
                    item.threads.to_string(),
                    item.loops_per_sec.map_or("-".into(), format_loops),
                    item.loops_per_sec_per_thread
                        .map_or("-".into(), format_loops),
                    point.map_or("-".into(), |p| format!("{:.2}x", p.speedup)),
                    point.map_or("-".into(), |p| format!("{:.0}%", p.efficiency * 100.0)),
                    format!("{:.2}", item.work_ns_per_loop),
                    item.cpus_seen
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    item.migrations.to_string(),
                ];
                if has_energy {
                    row.push(
                        item.joules_per_loop
                            .map_or("-".into(), |j| format!("{:.3}", j * 1e9)),
                    );
                }
                if has_baseline {
                    row.push(
                        point
                            .and_then(|p| p.share_of_baseline)
                            .map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
                    );
                }
                row
            })
            .collect();
        let types = record.context["core_types"]
            .as_array()
            .map(|types| {
                types
                    .iter()
                    .map(|t| {
                        format!(
                            "{} on cpus {}",
                            t["name"].as_str().unwrap_or("?"),
                            t["cpus"]
                                .as_array()
                                .map(|c| c
                                    .iter()
                                    .map(ToString::to_string)
                                    .collect::<Vec<_>>()
                                    .join(","))
                                .unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        let numeric = (2..header.len()).filter(|&i| i != 8).collect();
        vec![Table {
            title: format!("in-core loops, the empty loop's time taken off · core types: {types}"),
            header,
            rows,
            numeric,
        }]
    }
}
