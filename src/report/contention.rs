//! The contention table: each workload's rate alone and together, and the group's
//! aggregate, fairness and overlap.

use serde_json::Value;

use crate::analysis::contention::{Contention, WorkloadContention};
use crate::vocab::Table;
use crate::vocab::units::{format_rate, format_seconds, mb_per_sec};

/// A column: its name, whether it holds a number, and its cell for one workload.
type Column = (&'static str, bool, fn(&WorkloadContention) -> String);

/// The columns, each defined once with its cells.
const COLUMNS: [Column; 7] = [
    ("workload", true, |w| (w.workload + 1).to_string()),
    ("target", false, |w| w.target.clone()),
    ("alone MB/s", true, |w| {
        w.alone_bytes_per_sec.map_or("-".into(), mb_per_sec)
    }),
    ("together MB/s", true, |w| {
        mb_per_sec(w.together_bytes_per_sec)
    }),
    ("while all ran MB/s", true, |w| {
        mb_per_sec(w.overlap_bytes_per_sec)
    }),
    ("slowdown", true, |w| {
        w.slowdown.map_or("-".into(), |s| format!("{s:.2}x"))
    }),
    ("finished at", true, |w| {
        w.finished_at_s.map_or("-".into(), format_seconds)
    }),
];

/// The table of a stored contention report; `None` if it cannot be read.
pub fn table(stored: &Value) -> Option<Table> {
    let report: Contention = serde_json::from_value(stored.clone()).ok()?;
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
        header: COLUMNS
            .iter()
            .map(|(name, _, _)| name.to_string())
            .collect(),
        rows: report
            .workloads
            .iter()
            .map(|w| COLUMNS.iter().map(|(_, _, cell)| cell(w)).collect())
            .collect(),
        numeric: COLUMNS
            .iter()
            .enumerate()
            .filter(|(_, (_, numeric, _))| *numeric)
            .map(|(index, _)| index)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_row_has_a_cell_per_header() {
        let stored = json!({
            "overlap_s": 5.0, "overlap_start_s": 0.0, "overlap_end_s": 5.0,
            "aggregate_bytes_per_sec": 2e8, "alone_sum_bytes_per_sec": 4e8, "jain_index": 1.0,
            "interval_s": 0.1, "first_finished": 0,
            "workloads": [{
                "workload": 0, "target": "/a", "together_bytes_per_sec": 1e8,
                "overlap_bytes_per_sec": 1e8, "alone_bytes_per_sec": 2e8, "slowdown": 2.0,
                "started_at_s": 0.0, "finished_at_s": 5.0
            }]
        });
        let table = table(&stored).expect("a readable report");
        assert!(table.rows.iter().all(|row| row.len() == table.header.len()));
        assert_eq!(table.rows[0][5], "2.00x");
    }
}
