//! The task's chart: the whole task's rate and each step's alone, by thread count.

use super::stored::TaskSummary;
use crate::vocab::chart::{Chart, Line};
use crate::vocab::units::format_rate;

/// Rates of original bytes by thread count, from a stored summary; `None` when no
/// thread count was summarised.
pub fn chart(summary: &TaskSummary) -> Option<Chart> {
    let per = &summary.per_threads;
    let step = |op: &str| -> Vec<(f64, f64)> {
        per.iter()
            .filter_map(|p| Some((p.threads as f64, p.step(op)?.source_bytes_per_sec)))
            .collect()
    };
    let to = per.last()?.threads as f64;
    let mut lines = vec![Line {
        name: "whole task".into(),
        curve: summary.fits.best_curve(1.0, to),
        points: step("total"),
        ranges: Vec::new(),
    }];
    for op in ["read", "compress", "decompress", "write"] {
        let points = step(op);
        if !points.is_empty() {
            lines.push(Line {
                name: format!("{op} alone"),
                points,
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
