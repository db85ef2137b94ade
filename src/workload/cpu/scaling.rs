//! How each cpu test scales with threads, from its stored items: per test and class, the
//! rate at each thread count, its speedup and efficiency, what each added thread brought,
//! the share of a baseline run, and the scaling laws fitted to the rates.

use serde::{Deserialize, Serialize};

use super::Baseline;
use super::item::CpuItem;
use crate::analysis::fits::{ScalingFits, fit_scaling};

/// One thread count of one test and class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The scaling of every test and class of `items`, in the order first measured, with the
/// share of `baseline` where a run is compared with one.
pub fn scaling(items: &[CpuItem], baseline: Option<&Baseline>) -> Vec<Scaling> {
    let mut out: Vec<Scaling> = Vec::new();
    for item in items {
        if out
            .iter()
            .any(|s| s.test == item.test && s.class == item.class)
        {
            continue;
        }
        let mut same: Vec<&CpuItem> = items
            .iter()
            .filter(|i| i.test == item.test && i.class == item.class && i.loops_per_sec.is_some())
            .collect();
        same.sort_by_key(|i| i.threads);
        let points = points(&same, baseline);
        if points.is_empty() {
            continue;
        }
        let rates: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.threads as f64, p.loops_per_sec))
            .collect();
        let fits = fit_scaling(&rates);
        out.push(Scaling {
            test: item.test.clone(),
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

/// The points of one test and class, from its items with a rate, fewest threads first.
fn points(same: &[&CpuItem], baseline: Option<&Baseline>) -> Vec<ScalingPoint> {
    let Some(first) = same.first() else {
        return Vec::new();
    };
    let one_thread = first.loops_per_sec.unwrap_or(0.0) / first.threads as f64;
    let mut previous: Option<&CpuItem> = None;
    same.iter()
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
                share_of_baseline: baseline.and_then(|b| baseline_rate(b, i)).map(|b| rate / b),
            }
        })
        .collect()
}

/// The baseline's rate for the test, threads and class of `item`, if it has one.
fn baseline_rate(baseline: &Baseline, item: &CpuItem) -> Option<f64> {
    baseline
        .rates
        .iter()
        .find(|r| r.test == item.test && r.threads == item.threads && r.class == item.class)
        .map(|r| r.loops_per_sec)
}
