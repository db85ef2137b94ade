//! The task's chart: the whole task's rate and each step's alone, by thread count.

use serde_json::Value;

use crate::analysis::fits::ScalingFits;
use crate::vocab::chart::{Chart, Line};
use crate::vocab::units::format_rate;

/// Rates of original bytes by thread count, from a stored summary.
pub fn chart(summary: &Value) -> Option<Chart> {
    let per = summary["per_threads"].as_array()?;
    let step = |op: &str| -> Vec<(f64, f64)> {
        per.iter()
            .filter_map(|p| {
                let rate =
                    p["steps"].as_array()?.iter().find(|s| s["op"] == op)?["source_bytes_per_sec"]
                        .as_f64()?;
                Some((p["threads"].as_f64()?, rate))
            })
            .collect()
    };
    let to = per.last()?["threads"].as_f64()?;
    let mut lines = vec![Line {
        name: "whole task".into(),
        curve: ScalingFits::stored_curve(summary, 1.0, to),
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
