//! How ratelab summarises, judges and shows a stored monitor run: residency and
//! frequency per core, power, thread placement, and frequency against active cores;
//! every figure a source could not give is said to be unavailable, with its reason.

use crate::workload::Stored;
use serde_json::{Value, json};

use super::item::{MonitorItem, items_of};
use super::summary::{cores, freq_vs_active_cores, placements};
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict, WorkloadRecord};
use crate::monitor::Sources;
use crate::vocab::{Chart, Table};

/// How ratelab summarises, judges and shows stored monitor workloads.
pub struct MonitorKind;

fn sources_of(record: &WorkloadRecord) -> Option<Sources> {
    serde_json::from_value(record.context.get("sources")?.clone()).ok()
}

/// The power figures of a run's system items.
pub(super) struct PowerFigures {
    /// Each sample's total power, where known, in watts.
    pub watts: Vec<f64>,
    /// Each sample's energy, in joules (`None` where unknown).
    pub joules: Vec<Option<f64>>,
    /// Each sample's zones and their power, in watts.
    pub zones: Vec<(String, f64)>,
}

/// The system items' powers, energies and zones.
pub(super) fn power(items: &[MonitorItem]) -> PowerFigures {
    let mut figures = PowerFigures {
        watts: Vec::new(),
        joules: Vec::new(),
        zones: Vec::new(),
    };
    for item in items {
        if let MonitorItem::System {
            power_w,
            energy_j,
            zones,
            ..
        } = item
        {
            figures.watts.extend(*power_w);
            figures.joules.push(*energy_j);
            figures.zones.extend(
                zones
                    .iter()
                    .filter_map(|z| Some((z.zone.clone(), z.power_w?))),
            );
        }
    }
    figures
}

/// A fraction as a percentage for table cells: `97.5`.
pub(super) fn percent(value: f64) -> String {
    format!("{:.1}", value * 100.0)
}

/// A frequency as whole MHz for table cells: `2300`.
pub(super) fn mhz(hz: f64) -> String {
    format!("{:.0}", hz / 1e6)
}

impl MonitorKind {
    fn freq_fit(items: &[MonitorItem], sources: Option<&Sources>) -> Value {
        if let Some(reason) = sources.and_then(|s| s.freq_hz.unavailable.clone()) {
            return json!({ "unavailable": format!("no frequency: {reason}") });
        }
        match freq_vs_active_cores(items) {
            Ok(fit) => serde_json::to_value(fit).expect("fits serialise"),
            Err(reason) => json!({ "unavailable": reason }),
        }
    }
}

impl crate::workload::Kind for MonitorKind {
    const NAME: &'static str = "monitor";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;
    // Its series count samples taken, not bytes moved.
    const RATE_SERIES: bool = false;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        let items = items_of(record);
        let sources = sources_of(record);
        let PowerFigures {
            watts,
            joules,
            zones,
        } = power(&items);
        let all = |pick: fn(&MonitorItem) -> Option<f64>| -> Option<Stats> {
            Stats::of(&items.iter().filter_map(pick).collect::<Vec<_>>())
        };
        let mut zone_names: Vec<&String> = zones.iter().map(|(name, _)| name).collect();
        zone_names.sort();
        zone_names.dedup();
        let threads = placements(&items);
        json!({
            "samples": joules.len(),
            "cores": cores(&items),
            "active_fraction": all(|i| match i {
                MonitorItem::Core { active_fraction, .. } => *active_fraction,
                _ => None,
            }),
            "freq_hz": all(|i| match i {
                MonitorItem::Core { freq_hz, .. } => *freq_hz,
                _ => None,
            }),
            "power_w": Stats::of(&watts),
            "energy_j": joules.iter().copied().sum::<Option<f64>>().filter(|_| !joules.is_empty()),
            "zones": zone_names.iter().map(|name| json!({
                "zone": name,
                "power_w": Stats::of(&zones.iter().filter(|(z, _)| z == *name).map(|(_, w)| *w).collect::<Vec<_>>()),
            })).collect::<Vec<_>>(),
            "freq_vs_active_cores": MonitorKind::freq_fit(&items, sources.as_ref()),
            "threads": (!threads.is_empty()).then_some(threads),
            "sources": record.context.get("sources"),
        })
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        let mut out: Vec<Verdict> = sources_of(record)
            .map(|sources| {
                sources
                    .named()
                    .into_iter()
                    .filter_map(|(name, source)| {
                        Some(Verdict {
                            code: format!("{name}_unavailable"),
                            severity: Severity::Info,
                            message: format!(
                                "{name} is not measured on this machine (null in every sample): {}",
                                source.unavailable.as_ref()?
                            ),
                            workload: Some(workload),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let code = record.context["command_exit_code"].as_i64();
        let signal = record.context["command_signal"].as_i64();
        let stopped_by_monitor = record.context["ended_by"] != "command exited";
        if code.is_some_and(|c| c != 0) || (signal.is_some() && !stopped_by_monitor) {
            out.push(Verdict {
                code: "monitored_command_failed".into(),
                severity: Severity::Warning,
                message: format!(
                    "the watched command {} {}",
                    record.target,
                    match code {
                        Some(code) => format!("exited with status {code}"),
                        None => format!("was killed by signal {}", signal.unwrap_or(0)),
                    }
                ),
                workload: Some(workload),
            });
        }
        out
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        super::charts::charts(w.record)
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        let items = items_of(record);
        let sources = sources_of(record);
        let per_core = cores(&items);
        let has_freq = per_core.iter().any(|c| c.freq_hz.is_some());
        let mut header = vec!["cpu", "samples", "median active %", "mean active %"];
        if has_freq {
            header.extend(["median MHz", "min MHz", "max MHz"]);
        }
        let rows = per_core
            .iter()
            .map(|core| {
                let active = core.active_fraction.as_ref();
                let mut row = vec![
                    core.cpu.to_string(),
                    core.samples.to_string(),
                    active.map_or("-".into(), |s| percent(s.median)),
                    active.map_or("-".into(), |s| percent(s.mean)),
                ];
                if has_freq {
                    let freq = core.freq_hz.as_ref();
                    row.extend([
                        freq.map_or("-".into(), |s| mhz(s.median)),
                        freq.map_or("-".into(), |s| mhz(s.min)),
                        freq.map_or("-".into(), |s| mhz(s.max)),
                    ]);
                }
                row
            })
            .collect();
        let unavailable = |reason: Option<&String>| {
            reason.map_or(String::new(), |r| format!(" · unavailable: {r}"))
        };
        let mut tables = vec![Table {
            title: format!(
                "per-core active residency{} ({} samples){}",
                if has_freq { " and frequency" } else { "" },
                record.context["samples"].as_u64().unwrap_or(0),
                if has_freq {
                    String::new()
                } else {
                    unavailable(
                        sources
                            .as_ref()
                            .and_then(|s| s.freq_hz.unavailable.as_ref()),
                    )
                    .replace("unavailable", "frequency unavailable")
                }
            ),
            numeric: (1..header.len()).collect(),
            header: header.into_iter().map(String::from).collect(),
            rows,
        }];
        tables.extend(super::tables::power_table(&items, sources.as_ref()));
        tables.extend(super::tables::frequency_fit(&items, has_freq));
        tables.extend(super::tables::threads(&placements(&items)));
        tables
    }
}
