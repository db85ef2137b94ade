//! The scaled command's chart: its speedup by CPUs, with the fitted law.

use serde_json::Value;

use crate::analysis::fits::ScalingFits;
use crate::vocab::chart::{Chart, Line, plain_axis};

/// Speedup by CPUs, from a stored summary.
pub fn chart(summary: &Value, target: &str) -> Option<Chart> {
    let points: Vec<(f64, f64)> = summary["points"]
        .as_array()?
        .iter()
        .filter_map(|p| Some((p["cpus"].as_f64()?, p["speedup"].as_f64()?)))
        .collect();
    // The fits are of runs per second; a speedup is that over the first count's.
    let first = summary["points"][0]["seconds"].as_f64()?;
    let to = points.last()?.0;
    let lines = vec![Line {
        name: target.to_string(),
        curve: ScalingFits::stored_curve(summary, first, to),
        points,
        ranges: Vec::new(),
    }];
    Some(Chart::counted(
        "command: speedup by CPUs",
        "CPUs",
        "speedup",
        plain_axis,
        lines,
    ))
}
