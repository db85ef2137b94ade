//! The monitor's tables beyond per-core residency: power by zone, frequency against
//! active cores with its fit, and where each watched thread ran.

use super::item::MonitorItem;
use super::kind::{PowerFigures, mhz, power};
use super::summary::{ThreadPlacement, freq_vs_active_cores};
use crate::analysis::fits::evaluate;
use crate::analysis::stats::Stats;
use crate::monitor::Sources;
use crate::vocab::Table;

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
