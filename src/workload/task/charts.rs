//! The task's chart: the whole task's rate and each step's alone, by thread count, the
//! step that limits it drawn strongest.

use super::item::Step;
use super::summary::TaskSummary;
use crate::vocab::chart::{Chart, Line};
use crate::vocab::units::format_rate;

/// Rates of original bytes by thread count, from a stored summary; `None` when no
/// thread count was summarised.
pub fn chart(summary: &TaskSummary) -> Option<Chart> {
    let per = &summary.per_threads;
    let step = |op: Step| -> Vec<(f64, f64)> {
        per.iter()
            .filter_map(|p| Some((p.threads as f64, p.step(op)?.source_bytes_per_sec)))
            .collect()
    };
    let most = per.last()?;
    let to = most.threads as f64;
    let mut lines = vec![Line {
        name: "whole task".into(),
        curve: summary.fits.best_curve(1.0, to),
        points: step(Step::Total),
        ..Line::default()
    }];
    for op in [Step::Read, Step::Compress, Step::Decompress, Step::Write] {
        let points = step(op);
        // The step that limits the task at the most threads, as the summary says, is
        // the line the chart is about.
        let limits = op == most.rate_limiting_step;
        if !points.is_empty() {
            lines.push(Line {
                name: if limits {
                    format!("{op} alone: limits the task")
                } else {
                    format!("{op} alone")
                },
                points,
                strong: limits,
                ..Line::default()
            });
        }
    }
    Some(Chart::counted(
        "task: rate of original bytes by thread count",
        "compression threads",
        "original bytes per second",
        format_rate,
        lines,
    ))
}
