//! Figures over a monitor run's stored items: per-core residency and frequency, power,
//! where each watched thread ran and how often it moved, and frequency against the
//! number of active cores. Pure functions, testable with made-up items.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::item::{ACTIVE_AT, MonitorItem};
use crate::analysis::fits::{PolynomialFit, polynomial};
use crate::analysis::stats::Stats;
use crate::sensors::Sources;

/// The summary of a monitor workload as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorSummary {
    /// Samples taken (system items).
    pub samples: usize,
    /// Each core over the whole run, in CPU order.
    pub cores: Vec<CoreSummary>,
    /// Every core's active fraction in every sample; null when none counted a tick.
    pub active_fraction: Option<Stats>,
    /// Every core's frequency in every sample, in Hz; null when unavailable.
    pub freq_hz: Option<Stats>,
    /// The package or system power per sample, in watts; null when unavailable.
    pub power_w: Option<Stats>,
    /// Energy used over the run, in joules; null when any sample's is unknown.
    pub energy_j: Option<f64>,
    /// Each power zone or sensor, by name.
    pub zones: Vec<ZonePower>,
    /// Frequency against the number of active cores, or why there is no fit.
    pub freq_vs_active_cores: FreqVsActiveCores,
    /// Where each watched thread ran; null when no thread was watched.
    pub threads: Option<Vec<ThreadPlacement>>,
    /// Which source fed each figure (from the context).
    pub sources: Option<Sources>,
}

/// One power zone or sensor over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZonePower {
    /// The zone (`package-0`) or sensor (`amdgpu/PPT`).
    pub zone: String,
    /// Its power per sample, in watts.
    pub power_w: Option<Stats>,
}

/// Frequency against active cores: the fit, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Untagged, as first stored: the fit's fields, or `{"unavailable": reason}`.
#[serde(untagged)]
pub enum FreqVsActiveCores {
    /// No fit: why.
    Unavailable {
        /// Why frequency is not fitted against active cores.
        unavailable: String,
    },
    /// The fit.
    Fit(FreqFit),
}

/// One core over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreSummary {
    /// The CPU's number.
    pub cpu: u32,
    /// Samples of this core.
    pub samples: usize,
    /// Its active fractions; null when no sample counted a tick.
    pub active_fraction: Option<Stats>,
    /// Its frequencies, in Hz; null when unavailable.
    pub freq_hz: Option<Stats>,
}

/// Each core's statistics, in CPU order.
pub fn cores(items: &[MonitorItem]) -> Vec<CoreSummary> {
    let mut by_cpu: BTreeMap<u32, (usize, Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for item in items {
        if let MonitorItem::Core {
            cpu,
            active_fraction,
            freq_hz,
            ..
        } = item
        {
            let entry = by_cpu.entry(*cpu).or_default();
            entry.0 += 1;
            entry.1.extend(*active_fraction);
            entry.2.extend(*freq_hz);
        }
    }
    by_cpu
        .into_iter()
        .map(|(cpu, (samples, active, freq))| CoreSummary {
            cpu,
            samples,
            active_fraction: Stats::of(&active),
            freq_hz: Stats::of(&freq),
        })
        .collect()
}

/// Where one watched thread ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadPlacement {
    /// The thread id.
    pub tid: u32,
    /// Its name at the last sample.
    pub name: String,
    /// Samples it was seen in.
    pub samples: usize,
    /// Every CPU it was seen on, in order.
    pub cpus_seen: Vec<u32>,
    /// Times two consecutive samples saw it on different CPUs.
    pub migrations: usize,
    /// Its policy at the last sample.
    pub policy: String,
    /// Its nice value at the last sample.
    pub nice: i32,
}

/// Each watched thread's placement, by thread id.
pub fn placements(items: &[MonitorItem]) -> Vec<ThreadPlacement> {
    let mut by_tid: BTreeMap<u32, (ThreadPlacement, u32)> = BTreeMap::new();
    for item in items {
        let MonitorItem::Thread {
            tid,
            name,
            cpu,
            policy,
            nice,
            ..
        } = item
        else {
            continue;
        };
        let (placement, last_cpu) = by_tid.entry(*tid).or_insert_with(|| {
            let first = ThreadPlacement {
                tid: *tid,
                name: name.clone(),
                samples: 0,
                cpus_seen: Vec::new(),
                migrations: 0,
                policy: policy.clone(),
                nice: *nice,
            };
            (first, *cpu)
        });
        if *last_cpu != *cpu {
            placement.migrations += 1;
        }
        *last_cpu = *cpu;
        placement.samples += 1;
        if !placement.cpus_seen.contains(cpu) {
            placement.cpus_seen.push(*cpu);
            placement.cpus_seen.sort_unstable();
        }
        placement.name.clone_from(name);
        placement.policy.clone_from(policy);
        placement.nice = *nice;
    }
    by_tid.into_values().map(|(p, _)| p).collect()
}

/// Per sample, the number of active cores and the mean frequency of those cores (of
/// every core when none was active), in Hz; samples without a frequency are left out.
pub fn freq_points(items: &[MonitorItem]) -> Vec<(u32, f64)> {
    let mut by_sample: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for item in items {
        if let MonitorItem::Core {
            sample,
            active_fraction: Some(active),
            freq_hz: Some(freq),
            ..
        } = item
        {
            by_sample.entry(*sample).or_default().push((*active, *freq));
        }
    }
    by_sample
        .into_values()
        .map(|cores| {
            let active: Vec<f64> = cores
                .iter()
                .filter(|(a, _)| *a >= ACTIVE_AT)
                .map(|(_, f)| *f)
                .collect();
            let counted: Vec<f64> = if active.is_empty() {
                cores.iter().map(|(_, f)| *f).collect()
            } else {
                active.clone()
            };
            (
                active.len() as u32,
                counted.iter().sum::<f64>() / counted.len() as f64,
            )
        })
        .collect()
}

/// Mean frequency at one count of active cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreqAtCount {
    /// Cores at least half active.
    pub active_cores: u32,
    /// Mean of the samples' frequencies, in Hz.
    pub mean_freq_hz: f64,
    /// Samples with this count.
    pub samples: usize,
}

/// Frequency against active cores: the fit and the means it was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreqFit {
    /// The polynomial's degree: 2, or lower when fewer counts of active cores were seen.
    pub degree: usize,
    /// The fit over every sample (x: active cores, y: mean frequency in Hz).
    #[serde(flatten)]
    pub fit: PolynomialFit,
    /// The samples' mean frequency per count of active cores.
    pub by_active_cores: Vec<FreqAtCount>,
}

/// A quadratic (or, with fewer distinct counts, lower) fit of frequency against active
/// cores, or why there is none.
pub fn freq_vs_active_cores(items: &[MonitorItem]) -> Result<FreqFit, String> {
    let points = freq_points(items);
    let mut by_count: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for &(count, freq) in &points {
        by_count.entry(count).or_default().push(freq);
    }
    let degree = by_count.len().saturating_sub(1).min(2);
    if degree == 0 {
        return Err(match by_count.keys().next() {
            None => "no sample has a frequency".to_string(),
            Some(count) => {
                format!("every sample had {count} active cores: a fit needs at least two counts")
            }
        });
    }
    let xs: Vec<f64> = points.iter().map(|(c, _)| f64::from(*c)).collect();
    let ys: Vec<f64> = points.iter().map(|(_, f)| *f).collect();
    let fit = polynomial(&xs, &ys, degree).ok_or("the fit is degenerate")?;
    let mut fit = fit;
    // One residual per sample would bloat every stored summary; the table says enough.
    fit.residuals.clear();
    Ok(FreqFit {
        degree,
        fit,
        by_active_cores: by_count
            .into_iter()
            .map(|(active_cores, freqs)| FreqAtCount {
                active_cores,
                mean_freq_hz: freqs.iter().sum::<f64>() / freqs.len() as f64,
                samples: freqs.len(),
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(sample: u64, cpu: u32, active: f64, freq: Option<f64>) -> MonitorItem {
        MonitorItem::Core {
            sample,
            t_s: sample as f64 * 0.1,
            cpu,
            active_fraction: Some(active),
            freq_hz: freq,
            power_w: None,
        }
    }

    fn thread(sample: u64, tid: u32, cpu: u32) -> MonitorItem {
        MonitorItem::Thread {
            sample,
            t_s: sample as f64 * 0.1,
            tid,
            name: "worker".into(),
            cpu,
            policy: "normal".into(),
            nice: 0,
        }
    }

    #[test]
    fn migrations_count_changes_between_consecutive_samples() {
        let items = [
            thread(0, 7, 1),
            thread(1, 7, 1),
            thread(2, 7, 0),
            thread(3, 7, 1),
        ];
        let placement = &placements(&items)[0];
        assert_eq!(placement.cpus_seen, vec![0, 1]);
        assert_eq!((placement.samples, placement.migrations), (4, 2));
    }

    #[test]
    fn frequency_falls_with_active_cores_and_the_fit_finds_it() {
        // 3 GHz with one core active, 2.8 with two, 2.4 with three: a downward quadratic.
        let freq = [3.2e9, 3.0e9, 2.8e9, 2.4e9];
        let mut items = Vec::new();
        for sample in 0..8u64 {
            let active = (sample % 4) as u32;
            for cpu in 0..3u32 {
                let busy = if cpu < active { 1.0 } else { 0.0 };
                items.push(core(sample, cpu, busy, Some(freq[active as usize])));
            }
        }
        let fit = freq_vs_active_cores(&items).unwrap();
        assert_eq!(fit.degree, 2);
        assert_eq!(fit.by_active_cores.len(), 4);
        assert!(fit.fit.r2 > 0.95 && fit.fit.r2 <= 1.0, "{}", fit.fit.r2);
        assert!(fit.fit.coefficients[2] < 0.0);
    }

    #[test]
    fn without_frequency_there_is_no_fit_and_a_reason() {
        let items = [core(0, 0, 1.0, None), core(1, 0, 0.0, None)];
        assert_eq!(
            freq_vs_active_cores(&items).unwrap_err(),
            "no sample has a frequency"
        );
        assert_eq!(cores(&items)[0].freq_hz, None);
        assert_eq!(cores(&items)[0].active_fraction.unwrap().mean, 0.5);
    }
}
