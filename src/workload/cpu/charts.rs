//! The cpu tests' chart: speedup over the first thread count, with the fitted law.

use serde_json::Value;

use crate::analysis::fits::ScalingFits;
use crate::vocab::chart::{Chart, Line, plain_axis};

/// Speedup by threads of each test and class, from a stored summary.
pub fn chart(summary: &Value) -> Option<Chart> {
    let lines = summary["scaling"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let points: Vec<(f64, f64)> = s["points"]
                .as_array()?
                .iter()
                .filter_map(|p| Some((p["threads"].as_f64()?, p["speedup"].as_f64()?)))
                .collect();
            let first_rate = s["points"][0]["loops_per_sec"].as_f64()?;
            let to = points.last()?.0;
            Some(Line {
                name: format!("{} ({})", s["test"].as_str()?, s["class"].as_str()?),
                curve: ScalingFits::stored_curve(&s["fits"], 1.0 / first_rate, to),
                points,
                ranges: Vec::new(),
            })
        })
        .collect();
    Some(Chart::counted(
        "cpu tests: speedup over the first thread count",
        "threads",
        "speedup",
        plain_axis,
        lines,
    ))
}
