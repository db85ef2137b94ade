//! The contention table: each workload's rate alone and together, and the group's
//! aggregate, fairness and overlap.

use crate::analysis::contention::{Contention, WorkloadContention};
use crate::document::RunDocument;
use crate::vocab::units::format_seconds;
use crate::vocab::{RateUnit, Table};
use crate::workload;

/// How a rate cell reads: a bare number under a heading with the unit when the group
/// shares one unit, the number with its unit when storage and network mix.
#[derive(Clone, Copy)]
struct Cells {
    unit: RateUnit,
    shared: bool,
}

impl Cells {
    fn rate(self, rate: f64) -> String {
        if self.shared {
            self.unit.cell(rate)
        } else {
            self.unit.format(rate)
        }
    }
}

/// A column: its name (a rate column's unit follows it), whether it holds a rate, and
/// its cell for one workload.
type Column = (&'static str, bool, fn(&WorkloadContention, Cells) -> String);

/// The columns, each defined once with its cells.
const COLUMNS: [Column; 7] = [
    ("workload", false, |w, _| (w.workload + 1).to_string()),
    ("target", false, |w, _| w.target.clone()),
    ("alone", true, |w, c| {
        w.alone_bytes_per_sec.map_or("-".into(), |r| c.rate(r))
    }),
    ("together", true, |w, c| c.rate(w.together_bytes_per_sec)),
    ("while all ran", true, |w, c| {
        c.rate(w.overlap_bytes_per_sec)
    }),
    ("slowdown", false, |w, _| {
        w.slowdown.map_or("-".into(), |s| format!("{s:.2}x"))
    }),
    ("finished at", false, |w, _| {
        w.finished_at_s.map_or("-".into(), format_seconds)
    }),
];

/// Columns aligned right: all but the target.
const TEXT_COLUMN: usize = 1;

/// The table of a run's contention report, each workload's rates in its own unit;
/// `None` without one, or if it cannot be read.
pub fn table(doc: &RunDocument) -> Option<Table> {
    let report: Contention = serde_json::from_value(doc.contention.clone()?).ok()?;
    let unit_of = |w: usize| {
        doc.workloads
            .get(w)
            .map_or(RateUnit::BytesPerSec, workload::rate_unit)
    };
    let units: Vec<RateUnit> = report
        .workloads
        .iter()
        .map(|w| unit_of(w.workload))
        .collect();
    let shared = units.windows(2).all(|pair| pair[0] == pair[1]);
    let format_rate = |rate| RateUnit::format_for(&units, rate);
    let heading = |(name, rate, _): &Column| match (rate, shared, units.first()) {
        (true, true, Some(unit)) => format!("{name} {}", unit.words()),
        _ => name.to_string(),
    };
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
        header: COLUMNS.iter().map(heading).collect(),
        rows: report
            .workloads
            .iter()
            .map(|w| {
                let cells = Cells {
                    unit: unit_of(w.workload),
                    shared,
                };
                COLUMNS.iter().map(|(_, _, cell)| cell(w, cells)).collect()
            })
            .collect(),
        numeric: (0..COLUMNS.len()).filter(|&i| i != TEXT_COLUMN).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::WorkloadRecord;
    use serde_json::json;

    /// A run of `kinds` side by side, each moving 100 MB/s together and 200 alone.
    fn run_of(kinds: &[&str]) -> RunDocument {
        let workloads: Vec<_> = (0..kinds.len())
            .map(|w| {
                json!({
                    "workload": w, "target": format!("/t{w}"), "together_bytes_per_sec": 1e8,
                    "overlap_bytes_per_sec": 1e8, "alone_bytes_per_sec": 2e8, "slowdown": 2.0,
                    "started_at_s": 0.0, "finished_at_s": 5.0
                })
            })
            .collect();
        let mut doc = RunDocument::for_test(
            kinds
                .iter()
                .map(|kind| WorkloadRecord::for_test(kind, "t", vec![]))
                .collect(),
        );
        doc.contention = Some(json!({
            "overlap_s": 5.0, "overlap_start_s": 0.0, "overlap_end_s": 5.0,
            "aggregate_bytes_per_sec": 2e8, "alone_sum_bytes_per_sec": 4e8, "jain_index": 1.0,
            "interval_s": 0.1, "first_finished": 0, "workloads": workloads
        }));
        doc
    }

    #[test]
    fn every_row_has_a_cell_per_header() {
        let table = table(&run_of(&["disk", "disk"])).expect("a readable report");
        assert!(table.rows.iter().all(|row| row.len() == table.header.len()));
        assert_eq!(table.header[3], "together MB/s");
        assert_eq!(table.rows[0][3], "100.0");
        assert_eq!(table.rows[0][5], "2.00x");
    }

    #[test]
    fn network_rates_are_in_bits_and_a_mixed_group_names_each_unit() {
        let net = table(&run_of(&["net", "net"])).unwrap();
        assert_eq!(net.header[3], "together Gbit/s");
        assert_eq!(net.rows[0][3], "0.80");
        assert!(net.title.contains("together 1.60 Gbit/s"), "{}", net.title);
        let mixed = table(&run_of(&["disk", "net"])).unwrap();
        assert_eq!(mixed.header[3], "together");
        assert_eq!(mixed.rows[0][3], "100 MB/s");
        assert_eq!(mixed.rows[1][3], "800 Mbit/s");
        assert!(
            mixed.title.contains("together 200 MB/s = 1.60 Gbit/s"),
            "{}",
            mixed.title
        );
    }
}
