//! The contention table: each workload's rate alone and together, and the group's
//! aggregate, fairness and overlap.

use serde_json::Value;

use super::Table;
use super::units::{format_rate, format_seconds, mb_per_sec};
use crate::analysis::contention::Contention;

/// The table of a stored contention report; `None` if it cannot be read.
pub fn table(stored: &Value) -> Option<Table> {
    let report: Contention = serde_json::from_value(stored.clone()).ok()?;
    let rows = report
        .workloads
        .iter()
        .map(|w| {
            vec![
                (w.workload + 1).to_string(),
                w.target.clone(),
                w.alone_bytes_per_sec.map_or("-".into(), mb_per_sec),
                mb_per_sec(w.together_bytes_per_sec),
                mb_per_sec(w.overlap_bytes_per_sec),
                w.slowdown.map_or("-".into(), |s| format!("{s:.2}x")),
                w.finished_at_s.map_or("-".into(), format_seconds),
            ]
        })
        .collect();
    let alone = report
        .alone_sum_bytes_per_sec
        .map(|sum| format!(" (sum alone {})", format_rate(sum)))
        .unwrap_or_default();
    let overlap = if report.overlap_s > 0.0 {
        format!("all active for {}", format_seconds(report.overlap_s))
    } else {
        "never all active at once".to_string()
    };
    Some(Table {
        title: format!(
            "contention · together {}{alone} · Jain index {:.2} · {overlap}",
            format_rate(report.aggregate_bytes_per_sec),
            report.jain_index,
        ),
        header: [
            "workload",
            "target",
            "alone MB/s",
            "together MB/s",
            "slowdown",
            "finished at",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![0, 2, 3, 4, 5],
    })
}
