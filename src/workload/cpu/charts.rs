//! The cpu tests' chart: speedup over the first thread count, with the fitted law.

use super::kind::CpuSummary;
use crate::vocab::chart::{Chart, Line, plain_axis};

/// Speedup by threads of each test and class, from a stored summary.
pub fn chart(summary: &CpuSummary) -> Chart {
    let lines = summary
        .scaling
        .iter()
        .filter_map(|s| {
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|p| (p.threads as f64, p.speedup))
                .collect();
            // The fits are of loops per second; a speedup is that over the first point's.
            let first_rate = s.points.first()?.loops_per_sec;
            let to = points.last()?.0;
            Some(Line {
                name: format!("{} ({})", s.test, s.class),
                curve: s
                    .fits
                    .as_ref()
                    .and_then(|fits| fits.best_curve(1.0 / first_rate, to)),
                points,
                ..Line::default()
            })
        })
        .collect();
    Chart::counted(
        "cpu tests: speedup over the first thread count",
        "threads",
        "speedup",
        plain_axis,
        lines,
    )
}
