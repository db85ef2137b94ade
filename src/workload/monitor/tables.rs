//! The monitor's tables: per-core residency and frequency, power by zone, frequency
//! against active cores with its fit, and where each watched thread ran.

use super::item::MonitorItem;
use super::kind::{PowerFigures, power};
use super::summary::{CoreSummary, ThreadPlacement, freq_vs_active_cores};
use crate::analysis::fits::evaluate;
use crate::analysis::stats::Stats;
use crate::sensors::Sources;
use crate::vocab::Table;

/// Each core's active residency, and its frequency where a source gave it, over
/// `samples`; `freq_unavailable` says why there is no frequency.
pub fn per_core(cores: &[CoreSummary], samples: u64, freq_unavailable: Option<&String>) -> Table {
    let has_freq = cores.iter().any(|c| c.freq_hz.is_some());
    let mut header = vec!["cpu", "samples", "median active %", "mean active %"];
    if has_freq {
        header.extend(["median MHz", "min MHz", "max MHz"]);
    }
    let rows = cores
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
    let unavailable =
        |reason: Option<&String>| reason.map_or(String::new(), |r| format!(" · unavailable: {r}"));
    Table {
        title: format!(
            "per-core active residency{} ({samples} samples){}",
            if has_freq { " and frequency" } else { "" },
            if has_freq {
                String::new()
            } else {
                unavailable(freq_unavailable).replace("unavailable", "frequency unavailable")
            }
        ),
        numeric: (1..header.len()).collect(),
        header: header.into_iter().map(String::from).collect(),
        rows,
    }
}

/// Power per zone and in total, where a source gave it.
pub fn power_table(items: &[MonitorItem], sources: Option<&Sources>) -> Option<Table> {
    let PowerFigures {
        watts,
        joules,
        zones,
    } = power(items);
    let total = Stats::of(&watts)?;
    let energy: Option<f64> = joules.iter().copied().sum();
    let row = |name: &str, stats: &Stats, energy: Option<f64>| {
        vec![
            name.to_string(),
            format!("{:.2}", stats.median),
            format!("{:.2}", stats.min),
            format!("{:.2}", stats.max),
            energy.map_or("-".into(), |j| format!("{j:.1}")),
        ]
    };
    let mut rows = vec![row("total", &total, energy)];
    let mut names: Vec<&String> = zones.iter().map(|(name, _)| name).collect();
    names.sort();
    names.dedup();
    for name in names {
        let watts: Vec<f64> = zones
            .iter()
            .filter(|(z, _)| z == name)
            .map(|(_, w)| *w)
            .collect();
        if let Some(stats) = Stats::of(&watts) {
            rows.push(row(name, &stats, None));
        }
    }
    let source = sources
        .and_then(|s| s.system_power_w.source.clone())
        .unwrap_or_default();
    Some(Table {
        title: format!("power per sample ({source})"),
        header: ["zone", "median W", "min W", "max W", "energy J"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![1, 2, 3, 4],
    })
}

/// Mean frequency per count of active cores beside the fitted curve.
pub fn frequency_fit(items: &[MonitorItem], has_freq: bool) -> Option<Table> {
    if !has_freq {
        return None;
    }
    let fit = freq_vs_active_cores(items).ok()?;
    let rows = fit
        .by_active_cores
        .iter()
        .map(|at| {
            vec![
                at.active_cores.to_string(),
                at.samples.to_string(),
                mhz(at.mean_freq_hz),
                mhz(evaluate(&fit.fit.coefficients, f64::from(at.active_cores))),
            ]
        })
        .collect();
    Some(Table {
        title: format!(
            "frequency against active cores (≥ 50% active), polynomial of degree {} · R² {:.3}",
            fit.degree, fit.fit.r2
        ),
        header: ["active cores", "samples", "mean MHz", "fitted MHz"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![0, 1, 2, 3],
    })
}

/// Each watched thread's CPUs and migrations.
pub fn threads(placements: &[ThreadPlacement]) -> Option<Table> {
    if placements.is_empty() {
        return None;
    }
    let rows = placements
        .iter()
        .map(|p| {
            let cpus: Vec<String> = p.cpus_seen.iter().map(u32::to_string).collect();
            vec![
                p.tid.to_string(),
                p.name.clone(),
                p.samples.to_string(),
                cpus.join(","),
                p.migrations.to_string(),
                p.policy.clone(),
                p.nice.to_string(),
            ]
        })
        .collect();
    Some(Table {
        title: "where the watched threads ran (a migration: consecutive samples on different CPUs)"
            .into(),
        header: [
            "tid",
            "name",
            "samples",
            "CPUs seen",
            "migrations",
            "policy",
            "nice",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![0, 2, 4, 6],
    })
}

/// A fraction as a percentage for table cells: `97.5`.
fn percent(value: f64) -> String {
    format!("{:.1}", value * 100.0)
}

/// A frequency as whole MHz for table cells: `2300`.
fn mhz(hz: f64) -> String {
    format!("{:.0}", hz / 1e6)
}
