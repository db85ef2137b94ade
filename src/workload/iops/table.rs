//! The iops table: a row per test and op, its median round's rates and latency, and the
//! range of its rounds' IOPS beside them when a test ran more than one (as the disk
//! tables set `min-max` beside a median). A run of one round a test, or one stored before
//! rounds, shows as it always has.

use super::kind::IopsKind;
use super::rounds::Rounds;
use crate::vocab::Table;
use crate::vocab::units::{format_iops, format_latency, format_size};
use crate::workload::Stored;

/// The full table of an iops workload.
pub fn table(w: &Stored<IopsKind>) -> Table {
    let groups = Rounds::of(&w.items);
    let rounds = groups.iter().map(Rounds::count).max().unwrap_or(1);
    let repeated = rounds > 1;
    let rows: Vec<Vec<String>> = groups
        .iter()
        .map(|group| {
            let i = group.median();
            let l = &i.latency_ns;
            let mut row = vec![
                i.test.clone(),
                i.op_words(),
                format!("{:.1}", i.bytes_per_sec / 1e6),
                format_iops(i.iops),
            ];
            if repeated {
                let (min, max) = group.iops_range();
                row.push(if group.repeated() {
                    format!("{}-{}", format_iops(min), format_iops(max))
                } else {
                    "-".into()
                });
            }
            row.extend([
                format_latency(l.mean),
                format_latency(l.p50 as f64),
                format_latency(l.p99 as f64),
                format_latency(l.p99_9 as f64),
                format_latency(l.max as f64),
            ]);
            row
        })
        .collect();
    let mut header = vec!["test", "op", "MB/s", "IOPS"];
    if repeated {
        header.push("min-max");
    }
    header.extend(["mean", "p50", "p99", "p99.9", "max"]);
    let p = &w.params;
    let how = if p.direct { "O_DIRECT" } else { "buffered" };
    let title = if repeated {
        format!(
            "block I/O on a {} file · {how} · {rounds} rounds of {} s a test after a {} s \
             ramp · the median round, its latency · min-max of the rounds' IOPS",
            format_size(p.size_bytes),
            p.seconds,
            p.ramp_seconds
        )
    } else {
        format!(
            "block I/O on a {} file · {how} · {} s a test (+{} s ramp) · latency",
            format_size(p.size_bytes),
            p.seconds,
            p.ramp_seconds
        )
    };
    Table {
        title,
        numeric: (2..header.len()).collect(),
        header: header.iter().map(|h| h.to_string()).collect(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::workload::At;
    use crate::workload::iops::rounds::tests::round;
    use crate::workload::iops::{BlockTest, IopsItem, IopsOp, IopsPlan, Rw};

    /// The table of a workload of `items`, stored as they would be (JSON), `repeat`
    /// rounds asked for.
    fn table_of(items: &[serde_json::Value], repeat: Option<u32>) -> Table {
        let plan = IopsPlan {
            target: "/x".into(),
            size_bytes: 64 << 20,
            tests: ["RND4K-Q32T1", "RND4K-Q1T1"]
                .map(|t| t.parse::<BlockTest>().unwrap())
                .to_vec(),
            rw: vec![Rw::Read],
            seconds: 1.0,
            ramp_seconds: 1.0,
            direct: true,
            repeat: repeat.unwrap_or(1),
            seed: 1,
        };
        let mut record = WorkloadRecord::for_test("iops", "/x", items.to_vec());
        record.params = serde_json::to_value(&plan).unwrap();
        if repeat.is_none() {
            // A plan stored before rounds has no repeat.
            record.params.as_object_mut().unwrap().remove("repeat");
        }
        let doc = RunDocument::for_test(vec![record]);
        table(&Stored::<IopsKind>::decode(At::new(&doc, 0)).unwrap())
    }

    fn json(items: &[IopsItem]) -> Vec<serde_json::Value> {
        items
            .iter()
            .map(|i| serde_json::to_value(i).unwrap())
            .collect()
    }

    #[test]
    fn three_rounds_show_the_median_round_beside_their_range() {
        let items = [
            round("RND4K-Q32T1", IopsOp::Read, 1, 40_000.0),
            round("RND4K-Q32T1", IopsOp::Read, 2, 43_000.0),
            round("RND4K-Q32T1", IopsOp::Read, 3, 38_000.0),
            round("RND4K-Q1T1", IopsOp::Read, 1, 9_000.0),
            round("RND4K-Q1T1", IopsOp::Read, 2, 8_000.0),
            round("RND4K-Q1T1", IopsOp::Read, 3, 10_000.0),
        ];
        let table = table_of(&json(&items), Some(3));
        assert_eq!(
            table.header,
            [
                "test", "op", "MB/s", "IOPS", "min-max", "mean", "p50", "p99", "p99.9", "max"
            ]
        );
        assert_eq!(table.rows.len(), 2);
        // Round 1 is the median of RND4K-Q32T1: its rate and its latency (32 / 40k IOPS).
        assert_eq!(
            table.rows[0][..6],
            [
                "RND4K-Q32T1",
                "read",
                "163.8",
                "40.0k",
                "38.0k-43.0k",
                "800 µs"
            ]
        );
        assert_eq!(
            table.rows[1][..6],
            ["RND4K-Q1T1", "read", "36.9", "9000", "8000-10.0k", "111 µs"]
        );
        assert!(
            table
                .title
                .contains("3 rounds of 1 s a test after a 1 s ramp")
                && table.title.contains("the median round, its latency"),
            "{}",
            table.title
        );
    }

    #[test]
    fn a_run_stored_before_rounds_shows_as_it_did() {
        let mut items = json(&[
            round("RND4K-Q32T1", IopsOp::Read, 1, 40_000.0),
            round("RND4K-Q1T1", IopsOp::Read, 1, 9_000.0),
        ]);
        for item in &mut items {
            item.as_object_mut().unwrap().remove("round");
        }
        let table = table_of(&items, None);
        assert_eq!(
            table.header,
            [
                "test", "op", "MB/s", "IOPS", "mean", "p50", "p99", "p99.9", "max"
            ]
        );
        assert_eq!(
            table.rows[0][..5],
            ["RND4K-Q32T1", "read", "163.8", "40.0k", "800 µs"]
        );
        assert_eq!(
            table.title,
            "block I/O on a 64 MiB file · O_DIRECT · 1 s a test (+1 s ramp) · latency"
        );
        // One round asked for today reads the same.
        let today = table_of(
            &json(&[round("RND4K-Q32T1", IopsOp::Read, 1, 40_000.0)]),
            Some(1),
        );
        assert_eq!(today.header, table.header);
        assert_eq!(today.title, table.title);
    }
}
