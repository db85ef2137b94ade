//! The scaled command's chart: its speedup by CPUs, with the fitted law.

use super::kind::ScaleSummary;
use crate::vocab::chart::{Chart, Line, plain_axis};

/// Speedup by CPUs, from a stored summary; `None` without a point.
pub fn chart(summary: &ScaleSummary, target: &str) -> Option<Chart> {
    let points: Vec<(f64, f64)> = summary
        .points
        .iter()
        .map(|p| (p.cpus as f64, p.speedup))
        .collect();
    // The fits are of runs per second; a speedup is that over the first count's.
    let first = summary.points.first()?.seconds;
    let to = points.last()?.0;
    let lines = vec![Line {
        name: target.to_string(),
        curve: summary.fits.best_curve(first, to),
        points,
        ..Line::default()
    }];
    Some(Chart::counted(
        "command: speedup by CPUs",
        "CPUs",
        "speedup",
        plain_axis,
        lines,
    ))
}
