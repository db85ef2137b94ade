//! A task at a glance: its lines of the run's summary (the whole task's rate, then the
//! step that limits it and what the disk could carry beside it) and its step table
//! narrowed to 80 columns.

use super::item::Step;
use super::kind::{TaskKind, title};
use super::stored::DiskRuns;
use super::summary::{ThreadsSummary, per_threads};
use super::verdicts::series_beside;
use crate::vocab::units::{format_bytes, format_rate};
use crate::vocab::{SummaryLine, Table};
use crate::workload::{DecodeError, Decoded, Stored};

/// The info verdicts whose point the limit line makes.
const COVERS: [&str; 3] = ["rate_limiting_step", "what_if_differs", "disk_vs_task"];

/// The task's lines: its rate at the most threads (and the fewest), then what limits it.
pub fn summary_lines(w: &Stored<TaskKind>, run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
    let summaries = per_threads(&w.items);
    let (Some(fewest), Some(most)) = (summaries.first(), summaries.last()) else {
        return Ok(Vec::new());
    };
    let total = |s: &ThreadsSummary| {
        s.step(Step::Total)
            .map_or(f64::NAN, |t| t.source_bytes_per_sec)
    };
    let mut rate = format!(
        "{} of original bytes at {}",
        format_rate(total(most)),
        threads(most.threads)
    );
    if fewest.threads != most.threads {
        rate.push_str(&format!(
            ", {} at {}",
            format_rate(total(fewest)),
            threads(fewest.threads)
        ));
    }
    let what = format!(
        "{} with {} {} ({})",
        w.params.direction.as_str(),
        w.params.codec.as_str(),
        w.params.level,
        w.context.source_bytes.map_or("-".into(), format_bytes),
    );
    // The series of this run are the fresher figures; earlier runs stand in for them.
    let mut disks = series_beside(w, run)?;
    if disks.is_empty()
        && let Some(stored) = &w.context.disk_runs
    {
        disks = stored.clone();
    }
    Ok(vec![
        SummaryLine::new("task", format!("{what}: {rate}")),
        SummaryLine::new("limit", limit_words(most, &disks)).covering(&COVERS),
    ])
}

/// Whether the gain of freeing `op` was measured or modelled, with the model's figure
/// where it strays from the measured one.
fn how_known(summary: &ThreadsSummary, op: Step) -> String {
    match summary.model_strays(op) {
        Some((_, model)) => format!("measured; modelled {model:.2}x"),
        None if summary.measured_speedup_if_free.contains_key(&op) => "measured".to_string(),
        None if summary.unstable_what_if.contains_key(&op) => {
            "modelled; the measured what-if was unstable".to_string()
        }
        None => "modelled".to_string(),
    }
}

/// `1 thread`, `2 threads`.
pub(super) fn threads(n: usize) -> String {
    format!("{n} thread{}", if n == 1 { "" } else { "s" })
}

/// What limits the task at `summary`'s thread count, and how far the disk is from it.
fn limit_words(summary: &ThreadsSummary, disks: &DiskRuns) -> String {
    let limit = summary.rate_limiting_step;
    let alone = summary
        .step(limit)
        .map_or(f64::NAN, |s| s.source_bytes_per_sec);
    let gain = summary.gain_if_free(limit);
    let mut words = format!(
        "{limit} limits the task at {} ({} alone): {gain:.2}x faster were it free ({})",
        threads(summary.threads),
        format_rate(alone),
        how_known(summary, limit),
    );
    let rates = disks.rates();
    if let Some(disk) = rates.iter().find(|d| d.op == limit) {
        let verb = if limit == Step::Read { "read" } else { "wrote" };
        let step = summary.step(limit).map_or(f64::NAN, |s| s.bytes_per_sec);
        words.push_str(&format!(
            "; on {} the storage series {verb} {} and the {limit} step alone {}, in bytes on the disk",
            disk.target,
            format_rate(disk.bytes_per_sec),
            format_rate(step),
        ));
        return words;
    }
    // How many times the task's need of each op the disk carried: the least says how
    // much faster the task could go before the disk would limit it.
    let headroom = rates
        .iter()
        .filter_map(|disk| {
            let step = summary.step(disk.op)?;
            let needed = alone * step.bytes_per_sec / step.source_bytes_per_sec;
            Some(disk.bytes_per_sec / needed)
        })
        .filter(|h| h.is_finite())
        .fold(None, |least: Option<f64>, h| {
            Some(least.map_or(h, |l| l.min(h)))
        });
    if let Some(headroom) = headroom {
        words.push_str(&format!("; the disk could carry {headroom:.1}x more"));
    }
    words
}

/// A row per thread count: each step's rate alone and the whole task's, all in
/// original bytes per second, the step that limits it and its gain were it free.
pub fn brief_tables(w: &Stored<TaskKind>) -> Vec<Table> {
    let summaries = per_threads(&w.items);
    let Some(first) = summaries.first() else {
        return Vec::new();
    };
    let steps: Vec<Step> = first.steps.iter().map(|s| s.op).collect();
    let mut header = vec!["threads".to_string()];
    header.extend(steps.iter().map(|op| match op {
        Step::Total => "whole task".to_string(),
        op => op.to_string(),
    }));
    header.extend(["limit".to_string(), "if free".to_string()]);
    let rows = summaries
        .iter()
        .map(|summary| {
            let mut row = vec![summary.threads.to_string()];
            row.extend(steps.iter().map(|op| {
                summary
                    .step(*op)
                    .map_or("-".into(), |s| format_rate(s.source_bytes_per_sec))
            }));
            let limit = summary.rate_limiting_step;
            row.push(limit.to_string());
            row.push(format!("{:.2}x", summary.gain_if_free(limit)));
            row
        })
        .collect();
    vec![Table {
        title: format!(
            "{} · each step alone, in original bytes",
            title(w, first.ratio)
        ),
        numeric: (0..header.len())
            .filter(|&i| i != header.len() - 2)
            .collect(),
        header,
        rows,
    }]
}
