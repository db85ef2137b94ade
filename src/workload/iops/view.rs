//! How ratelab summarises, judges and shows stored iops workloads.

use super::kind::IopsKind;
use super::notation::Order;
use super::rounds::Rounds;
use super::stored::IopsItem;
use crate::document::Verdict;
use crate::vocab::units::{
    format_iops, format_iops_words, format_latency, format_rate, format_size,
};
use crate::vocab::{
    Chart, Exposure, GroupKey, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table,
};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, IopsKind> {
    fn exposure(&self) -> Exposure {
        Exposure::STORAGE
    }

    /// The median round of each test and op, as the table shows it.
    fn charts(&self) -> Vec<Chart> {
        let medians: Vec<&IopsItem> = Rounds::of(&self.items).iter().map(Rounds::median).collect();
        vec![super::chart::percentile_chart(medians)]
    }

    /// Each interval of each test and op: its IOPS, p50 and p99 latency, each a group.
    /// The key names no round, so every round's intervals are samples of one group.
    fn samples(&self) -> Option<Samples> {
        let mut items = Vec::new();
        for item in &self.items {
            let op = format!("{} {}", item.test, item.op_words());
            let key = |unit, figure: &str| GroupKey::new(unit, format!("{op} {figure}"));
            let iops = key(RateUnit::Iops, "IOPS");
            let p50 = key(RateUnit::LatencyNs, "p50");
            let p99 = key(RateUnit::LatencyNs, "p99");
            for interval in &item.intervals {
                let rate = interval.ios as f64 / item.interval_seconds;
                items.push((iops.clone(), (item.interval_seconds > 0.0).then_some(rate)));
                items.push((p50.clone(), interval.p50_ns.map(|ns| ns as f64)));
                items.push((p99.clone(), interval.p99_ns.map(|ns| ns as f64)));
            }
        }
        Some(Samples { items })
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        Ok(super::verdicts::verdicts(self))
    }

    fn link_limit(&self) -> Option<LinkLimit> {
        let chain = self.context.chain.as_ref();
        Some(crate::storage::rates::link_limit(
            chain.and_then(|c| c.max_bytes_per_sec),
            chain,
        ))
    }

    fn tables(&self) -> Vec<Table> {
        vec![super::table::table(self)]
    }

    /// The table without its rarest figures (p99.9, max), to fit 80 columns; with the
    /// rounds' range, without the mean too (it is depth / IOPS, by Little's law).
    fn brief_tables(&self) -> Vec<Table> {
        self.tables()
            .into_iter()
            .map(|table| {
                let keep: &[&str] = if table.header.iter().any(|h| h == "min-max") {
                    &["test", "op", "MB/s", "IOPS", "min-max", "p50", "p99"]
                } else {
                    &["test", "op", "MB/s", "IOPS", "mean", "p50", "p99"]
                };
                table.keep_columns(keep)
            })
            .collect()
    }

    /// Each test's IOPS per interval of every round, keyed by the target and everything
    /// that sets them (not the rounds: an interval's IOPS does not depend on how many).
    fn profile_figures(&self) -> Vec<ProfileFigure> {
        let p = &self.params;
        Rounds::of(&self.items)
            .iter()
            .map(|rounds| {
                let item = rounds.median();
                let settings = serde_json::to_string(&(
                    &self.record.target,
                    p.size_bytes,
                    p.seconds,
                    p.ramp_seconds,
                    p.direct,
                ))
                .expect("settings serialise");
                let what = format!("{} {}", item.test, item.op_words());
                ProfileFigure {
                    key: format!("iops {what} {settings}"),
                    words: format!("{what} IOPS on {}", self.record.target),
                    rates: rounds
                        .items
                        .iter()
                        .flat_map(|round| {
                            round
                                .intervals
                                .iter()
                                .map(|i| i.ios as f64 / round.interval_seconds)
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// A line per order and block size: sequential tests by their rate, random ones by
    /// IOPS and p99, read then write, each at its depth and threads, of its median round.
    fn summary_lines(&self, _run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        let medians: Vec<&IopsItem> = Rounds::of(&self.items).iter().map(Rounds::median).collect();
        let mut groups: Vec<(Order, u64)> = Vec::new();
        for item in &medians {
            if !groups.contains(&(item.order, item.block_bytes)) {
                groups.push((item.order, item.block_bytes));
            }
        }
        let lines = groups
            .into_iter()
            .map(|(order, block)| {
                let in_group = |i: &&IopsItem| i.order == order && i.block_bytes == block;
                // Each op once, in the order met, reads first.
                let mut ops: Vec<String> = Vec::new();
                for op in medians
                    .iter()
                    .copied()
                    .filter(in_group)
                    .map(IopsItem::op_words)
                {
                    if !ops.contains(&op) {
                        ops.push(op);
                    }
                }
                ops.sort_by_key(|op| !op.starts_with("read"));
                let ops: Vec<String> = ops
                    .into_iter()
                    .filter_map(|op| {
                        let figures: Vec<String> = medians
                            .iter()
                            .copied()
                            .filter(in_group)
                            .filter(|i| i.op_words() == op)
                            .enumerate()
                            .map(|(n, i)| {
                                let at = match i.threads {
                                    1 => format!("Q{}", i.queue_depth),
                                    t => format!("Q{}T{t}", i.queue_depth),
                                };
                                match order {
                                    Order::Sequential => {
                                        format!("{} at {at}", format_rate(i.bytes_per_sec))
                                    }
                                    // The unit once per op: `41.2k IOPS at Q32 (p99 ..), 9.8k at Q1`.
                                    Order::Random => format!(
                                        "{} at {at} (p99 {})",
                                        if n == 0 {
                                            format_iops_words(i.iops)
                                        } else {
                                            format_iops(i.iops)
                                        },
                                        format_latency(i.latency_ns.p99 as f64)
                                    ),
                                }
                            })
                            .collect();
                        (!figures.is_empty()).then(|| format!("{op} {}", figures.join(", ")))
                    })
                    .collect();
                let order = match order {
                    Order::Sequential => "sequential",
                    Order::Random => "random",
                };
                SummaryLine::new(
                    "block I/O",
                    format!("{order} {}: {}", format_size(block), ops.join("; ")),
                )
            })
            .collect();
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {

    use super::super::kind::*;
    use super::super::*;
    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};
    use crate::workload::At;
    use crate::workload::Kind;
    use crate::workload::iops::rounds::tests::round;
    use crate::workload::iops::{BlockTest, Rw};

    #[test]
    fn every_round_is_a_sample_of_one_group_and_one_profile_figure() {
        let items: Vec<serde_json::Value> = (1..=3)
            .map(|n| round("RND4K-Q32T1", IopsOp::Read, n, 40_000.0 + f64::from(n)))
            .map(|item| serde_json::to_value(item).unwrap())
            .collect();
        let plan = IopsPlan {
            target: "/x".into(),
            size_bytes: 64 << 20,
            tests: vec!["RND4K-Q32T1".parse::<BlockTest>().unwrap()],
            rw: vec![Rw::Read],
            seconds: 1.0,
            ramp_seconds: 1.0,
            repeat: 3,
            direct: true,
            seed: 1,
        };
        let mut record = WorkloadRecord::for_test("iops", "/x", items);
        record.params = serde_json::to_value(&plan).unwrap();
        let doc = RunDocument::for_test(vec![record]);
        let w = Stored::<IopsKind>::decode(At::new(&doc, 0)).unwrap();
        let samples = w.samples().unwrap();
        let iops: Vec<_> = samples
            .items
            .iter()
            .filter(|(key, _)| key.op == "RND4K-Q32T1 read IOPS")
            .collect();
        // Ten intervals a round, three rounds, one key.
        assert_eq!(iops.len(), 30);
        let figures = w.profile_figures();
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].rates.len(), 30);
        let summary = IopsKind::summarize(&w, &Decoded::of(&doc));
        assert_eq!(summary.tests.len(), 1);
        assert_eq!(summary.tests[0].rounds, 3);
        assert_eq!(summary.tests[0].iops, 40_002.0);
        assert_eq!(
            (summary.tests[0].min_iops, summary.tests[0].max_iops),
            (40_001.0, 40_003.0)
        );
    }
}
