//! What a stored monitor workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use super::MonitorPlan;
use super::context::MonitorContext;
use super::item::MonitorItem;
use super::summary::{
    FreqVsActiveCores, MonitorSummary, ZonePower, cores, freq_vs_active_cores, placements,
};
use crate::analysis::stats::Stats;
use crate::sensors::Sources;
use crate::workload::{Decoded, Kind, Stored};

/// The monitor kind: its stored shapes and what a run concludes from them.
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
    const NAME: &'static str = "monitor";
    type Params = MonitorPlan;
    type Context = MonitorContext;
    type Item = MonitorItem;
    type Summary = MonitorSummary;
    // Its series count samples taken, not bytes moved.
    const RATE_SERIES: bool = false;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> MonitorSummary {
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
}
