//! What moved since the last profile of a machine. Only figures measured the same way
//! in both runs are set side by side: the storage series of the same target with the
//! same sizes and passes, by operation, over the files of 64 MiB and more (the rates a
//! big transfer sees, and enough items for a rank test). Each is tested with a
//! Mann-Whitney U test, Holm-corrected across the figures so that several tests at
//! once do not raise false alarms, and called only when its median moved by 10% or
//! more. Other parts (one cpu item per test and thread count, a few net intervals)
//! have too few items to tell noise from change; `results compare` shows them all. A
//! change is never put down to the storage when other work disturbed either run.

use super::DiskKind;
use crate::analysis::interference;
use crate::analysis::mann_whitney::{self, holm};
use crate::analysis::stats::Stats;
use crate::document::{RunDocument, Severity, Verdict};
use crate::storage::rates::streaming_rates;
use crate::workload::{At, DecodeError, Kind, Stored};

/// Family-wise error rate of the tests together.
const ALPHA: f64 = 0.05;
/// Smallest move of a median worth a word.
const MIN_CHANGE: f64 = 0.10;
/// Figures named in the verdict; the rest are counted.
const NAMED: usize = 6;

/// The codes of the verdicts on what moved since the last profile.
pub const CODES: [&str; 4] = [
    "since_last_profile",
    "unchanged_since_last_profile",
    "changed_since_last_profile",
    "disturbed_since_last_profile",
];

/// One figure of both runs.
struct Figure {
    words: String,
    ratio: f64,
    p_value: f64,
}

/// The storage series of `run`, decoded; those run alone first (`--alone`) are left out.
fn series_of(run: &RunDocument) -> Result<Vec<Stored<'_, DiskKind>>, DecodeError> {
    (0..run.workloads.len())
        .filter(|&i| run.workloads[i].kind == DiskKind::NAME && run.workloads[i].alone_of.is_none())
        .map(|i| Stored::decode(At::new(run, i)))
        .collect()
}

/// The verdicts on what moved from `previous` to `current`, two profiles of one machine.
pub fn since(previous: &RunDocument, current: &RunDocument) -> Result<Vec<Verdict>, DecodeError> {
    let before = format!(
        "profile run {} of this machine ({})",
        previous.run_id.unwrap_or_default(),
        previous.started_at
    );
    let verdict = Verdict::about(None);
    let figures = figures(previous, current)?;
    if figures.is_empty() {
        return Ok(vec![verdict(
            CODES[0],
            Severity::Info,
            format!(
                "{before} measured other targets or settings: no storage figure to set this one against"
            ),
        )]);
    }
    let p_values: Vec<f64> = figures.iter().map(|f| f.p_value).collect();
    let moved = holm(&p_values, ALPHA);
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
        return Ok(vec![verdict(
            CODES[1],
            Severity::Info,
            format!(
                "no storage figure moved beyond the noise since {before} ({}; files of 64 MiB and more)",
                all.join(", ")
            ),
        )]);
    }
    let named: Vec<String> = called
        .iter()
        .take(NAMED)
        .map(|f| format!("{} {:.2}x (p {:.2e})", f.words, f.ratio, f.p_value))
        .collect();
    let more = if called.len() > NAMED {
        format!("; and {} more", called.len() - NAMED)
    } else {
        String::new()
    };
    let disturbed: Vec<String> = [(previous, "that run"), (current, "this run")]
        .into_iter()
        .filter(|(run, _)| interference::disturbed(run))
        .map(|(_, which)| which.to_string())
        .collect();
    if !disturbed.is_empty() {
        return Ok(vec![verdict(
            CODES[3],
            Severity::Info,
            format!(
                "since {before}, storage figures moved ({}{more}), but other work disturbed {} \
                 (see the disturbed verdict): the change is not put down to the storage",
                named.join("; "),
                disturbed.join(" and ")
            ),
        )]);
    }
    let slower = called.iter().any(|f| f.ratio < 1.0);
    Ok(vec![verdict(
        CODES[2],
        if slower {
            Severity::Warning
        } else {
            Severity::Info
        },
        format!(
            "since {before}, storage moved beyond the noise: {}{} (files of 64 MiB and more; `ratelab results compare {} {}` shows every size)",
            named.join("; "),
            more,
            previous.run_id.unwrap_or_default(),
            current.run_id.unwrap_or_default(),
        ),
    )])
}

/// The streaming rates of writes and reads of every storage series that both runs
/// measured the same way, each set against the other with a rank test.
fn figures(previous: &RunDocument, current: &RunDocument) -> Result<Vec<Figure>, DecodeError> {
    let mut figures: Vec<Figure> = Vec::new();
    let earlier = series_of(previous)?;
    for now in series_of(current)? {
        let Some(then) = earlier.iter().find(|then| same_series(then, &now)) else {
            continue;
        };
        for op in ["write", "read"] {
            let (a, b) = (
                streaming_rates(&then.items, op),
                streaming_rates(&now.items, op),
            );
            let (Some(test), Some(x), Some(y)) =
                (mann_whitney::test(&a, &b), Stats::of(&a), Stats::of(&b))
            else {
                continue;
            };
            figures.push(Figure {
                words: format!("{op} on {}", now.record.target),
                ratio: y.median / x.median,
                p_value: test.p_value,
            });
        }
    }
    Ok(figures)
}

/// Whether two storage series are one series measured twice: the same target, sizes,
/// passes, read modes, sync, engine and block size.
fn same_series(a: &Stored<DiskKind>, b: &Stored<DiskKind>) -> bool {
    let (x, y) = (&a.params.plan, &b.params.plan);
    a.record.target == b.record.target
        && x.sizes_bytes == y.sizes_bytes
        && x.repeat == y.repeat
        && x.read_modes == y.read_modes
        && x.sync == y.sync
        && x.direct_writes == y.direct_writes
        && x.engine == y.engine
        && x.block_size_bytes == y.block_size_bytes
}
