//! How ratelab summarises, judges and shows a stored monitor run: residency and
//! frequency per core, power, thread placement, and frequency against active cores;
//! every figure a source could not give is said to be unavailable, with its reason.

use super::context::{Ended, MonitorContext};
use super::item::MonitorItem;
use super::summary::{
    FreqVsActiveCores, MonitorSummary, ZonePower, cores, freq_vs_active_cores, placements,
};
use super::{MonitorPlan, brief, charts, tables};
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict};
use crate::sensors::Sources;
use crate::vocab::Exposure;
use crate::vocab::{Chart, Table, Unmeasured};
use crate::workload::{Kind, Stored};

/// Watched threads listed one by one, at most; more are grouped by what they do.
const MAX_THREAD_ROWS: usize = 16;

/// How ratelab summarises, judges and shows stored monitor workloads.
pub struct MonitorKind;

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

impl MonitorKind {
    fn freq_fit(items: &[MonitorItem], sources: Option<&Sources>) -> FreqVsActiveCores {
        if let Some(reason) = sources.and_then(|s| s.freq_hz.unavailable.clone()) {
            return FreqVsActiveCores::Unavailable {
                unavailable: format!("no frequency: {reason}"),
            };
        }
        match freq_vs_active_cores(items) {
            Ok(fit) => FreqVsActiveCores::Fit(fit),
            Err(unavailable) => FreqVsActiveCores::Unavailable { unavailable },
        }
    }
}

impl Kind for MonitorKind {
    fn exposure(&self, _w: &Stored<Self>) -> Exposure {
        // It watches the machine: other work is what it shows, not what disturbs it.
        Exposure::NONE
    }

    const NAME: &'static str = "monitor";
    type Params = MonitorPlan;
    type Context = MonitorContext;
    type Item = MonitorItem;
    type Summary = MonitorSummary;
    // Its series count samples taken, not bytes moved.
    const RATE_SERIES: bool = false;

    fn summarize(&self, w: &Stored<Self>) -> MonitorSummary {
        let items = &w.items;
        let sources = w.context.sources.as_ref();
        let PowerFigures {
            watts,
            joules,
            zones,
        } = power(items);
        let all = |pick: fn(&MonitorItem) -> Option<f64>| -> Option<Stats> {
            Stats::of(&items.iter().filter_map(pick).collect::<Vec<_>>())
        };
        let mut zone_names: Vec<&String> = zones.iter().map(|(name, _)| name).collect();
        zone_names.sort();
        zone_names.dedup();
        let threads = placements(items);
        MonitorSummary {
            samples: joules.len(),
            cores: cores(items),
            active_fraction: all(|i| match i {
                MonitorItem::Core {
                    active_fraction, ..
                } => *active_fraction,
                _ => None,
            }),
            freq_hz: all(|i| match i {
                MonitorItem::Core { freq_hz, .. } => *freq_hz,
                _ => None,
            }),
            power_w: Stats::of(&watts),
            energy_j: joules
                .iter()
                .copied()
                .sum::<Option<f64>>()
                .filter(|_| !joules.is_empty()),
            zones: zone_names
                .iter()
                .map(|name| ZonePower {
                    zone: name.to_string(),
                    power_w: Stats::of(
                        &zones
                            .iter()
                            .filter(|(z, _)| z == *name)
                            .map(|(_, w)| *w)
                            .collect::<Vec<_>>(),
                    ),
                })
                .collect(),
            freq_vs_active_cores: MonitorKind::freq_fit(items, sources),
            threads: (!threads.is_empty()).then_some(threads),
            sources: sources.cloned(),
        }
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let workload = w.index();
        let mut out: Vec<Verdict> = w
            .context
            .sources
            .iter()
            .flat_map(Sources::named)
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
            .collect();
        let context = &w.context;
        let (code, signal) = (context.command_exit_code, context.command_signal);
        let stopped_by_monitor = context.ended_by != Some(Ended::CommandExited);
        if code.is_some_and(|c| c != 0) || (signal.is_some() && !stopped_by_monitor) {
            out.push(Verdict {
                code: "monitored_command_failed".into(),
                severity: Severity::Warning,
                message: format!(
                    "the watched command {} {}",
                    w.record.target,
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
        charts::charts(&w.items)
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let items = &w.items;
        let sources = w.context.sources.as_ref();
        let per_core = cores(items);
        let has_freq = per_core.iter().any(|c| c.freq_hz.is_some());
        let mut tables = vec![tables::per_core(
            &per_core,
            w.context.samples,
            sources.and_then(|s| s.freq_hz.unavailable.as_ref()),
        )];
        tables.extend(tables::power_table(items, sources));
        tables.extend(tables::frequency_fit(items, has_freq));
        // A row per thread reads for a few; many (a cpu test on 16 cores) read by group.
        let placements = placements(items);
        tables.extend(if placements.len() > MAX_THREAD_ROWS {
            brief::grouped(&placements, false)
        } else {
            tables::threads(&placements)
        });
        tables
    }

    fn unmeasured(&self, w: &Stored<Self>) -> Vec<Unmeasured> {
        brief::unmeasured(w)
    }

    fn brief_tables(&self, w: &Stored<Self>) -> Vec<Table> {
        brief::brief_tables(w)
    }
}
