//! What moved since the last profile of a machine. Only figures measured the same way
//! in both runs are set side by side: the storage series of the same target with the
//! same sizes and passes, by operation, over the files of 64 MiB and more (the rates a
//! big transfer sees, and enough items for a rank test). Each is tested with a
//! Mann-Whitney U test, Holm-corrected across the figures so that several tests at
//! once do not raise false alarms, and called only when its median moved by 10% or
//! more. Other parts (one cpu item per test and thread count, a few net intervals)
//! have too few items to tell noise from change; `results compare` shows them all.

use super::disk::streaming_rates;
use super::mann_whitney;
use super::stats::Stats;
use crate::document::{RunDocument, Severity, Verdict, WorkloadRecord};
use crate::workload::disk::item::items_of;

/// Family-wise error rate of the tests together.
const ALPHA: f64 = 0.05;
/// Smallest move of a median worth a word.
const MIN_CHANGE: f64 = 0.10;
/// Figures named in the verdict; the rest are counted.
const NAMED: usize = 6;

/// One figure of both runs.
struct Figure {
    words: String,
    ratio: f64,
    p_value: f64,
}

/// The verdicts on what moved from `previous` to `current`, two profiles of one machine.
pub fn since(previous: &RunDocument, current: &RunDocument) -> Vec<Verdict> {
    let before = format!(
        "profile run {} of this machine ({})",
        previous.run_id.unwrap_or_default(),
        previous.started_at
    );
    let verdict = Verdict::about(None);
    let mut figures: Vec<Figure> = Vec::new();
    for now in current
        .workloads
        .iter()
        .filter(|w| w.kind == "disk" && w.alone_of.is_none())
    {
        let Some(then) = previous.workloads.iter().find(|w| same_series(w, now)) else {
            continue;
        };
        let (then_items, now_items) = (items_of(then), items_of(now));
        for op in ["write", "read"] {
            let (a, b) = (
                streaming_rates(&then_items, op),
                streaming_rates(&now_items, op),
            );
            let (Some(test), Some(x), Some(y)) =
                (mann_whitney::test(&a, &b), Stats::of(&a), Stats::of(&b))
            else {
                continue;
            };
            figures.push(Figure {
                words: format!("{op} on {}", now.target),
                ratio: y.median / x.median,
                p_value: test.p_value,
            });
        }
    }
    if figures.is_empty() {
        return vec![verdict(
            "since_last_profile",
            Severity::Info,
            format!(
                "{before} measured other targets or settings: no storage figure to set this one against"
            ),
        )];
    }
    let moved = holm(&figures);
    let all: Vec<String> = figures
        .iter()
        .map(|f| format!("{} {:.2}x", f.words, f.ratio))
        .collect();
    let called: Vec<&Figure> = figures
        .iter()
        .zip(&moved)
        .filter(|(f, beyond)| **beyond && (f.ratio - 1.0).abs() >= MIN_CHANGE)
        .map(|(f, _)| f)
        .collect();
    if called.is_empty() {
        return vec![verdict(
            "unchanged_since_last_profile",
            Severity::Info,
            format!(
                "no storage figure moved beyond the noise since {before} ({}; files of 64 MiB and more)",
                all.join(", ")
            ),
        )];
    }
    let slower = called.iter().any(|f| f.ratio < 1.0);
    let named: Vec<String> = called
        .iter()
        .take(NAMED)
        .map(|f| format!("{} {:.2}x (p {:.2e})", f.words, f.ratio, f.p_value))
        .collect();
    vec![verdict(
        "changed_since_last_profile",
        if slower {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "since {before}, storage moved beyond the noise: {}{} (files of 64 MiB and more; `ratelab results compare {} {}` shows every size)",
            named.join("; "),
            if called.len() > NAMED {
                format!("; and {} more", called.len() - NAMED)
            } else {
                String::new()
            },
            previous.run_id.unwrap_or_default(),
            current.run_id.unwrap_or_default(),
        ),
    )]
}

/// Whether two disk workloads are one series measured twice: the same target, sizes,
/// passes, read modes, sync and engine.
fn same_series(a: &WorkloadRecord, b: &WorkloadRecord) -> bool {
    let keys = [
        "sizes_bytes",
        "repeat",
        "read_modes",
        "sync",
        "direct_writes",
        "engine",
        "block_size_bytes",
    ];
    a.kind == b.kind
        && a.alone_of.is_none()
        && a.target == b.target
        && keys.iter().all(|k| a.params[k] == b.params[k])
}

/// Holm's step-down correction: which p-values stand with the family-wise rate held
/// at [`ALPHA`].
fn holm(figures: &[Figure]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..figures.len()).collect();
    order.sort_by(|&a, &b| figures[a].p_value.total_cmp(&figures[b].p_value));
    let mut beyond = vec![false; figures.len()];
    for (rank, &index) in order.iter().enumerate() {
        if figures[index].p_value > ALPHA / (figures.len() - rank) as f64 {
            break;
        }
        beyond[index] = true;
    }
    beyond
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(p_value: f64) -> Figure {
        Figure {
            words: String::new(),
            ratio: 2.0,
            p_value,
        }
    }

    #[test]
    fn holm_steps_down_until_a_p_value_is_too_large() {
        // Thresholds for four tests: 0.0125, 0.0167, 0.025, 0.05.
        let figures = [figure(0.01), figure(0.04), figure(0.015), figure(0.03)];
        assert_eq!(holm(&figures), [true, false, true, false]);
        assert_eq!(holm(&[figure(0.03), figure(0.04)]), [false, false]);
        assert_eq!(holm(&[figure(0.02), figure(0.03)]), [true, true]);
    }
}
