//! A test and op over its rounds (`--repeat`): the stored items grouped, the median
//! round that tables, summaries and verdicts show, and the range of them all. A run
//! stored before rounds has one item per test and op: its only round.

use super::latency::IntervalFigures;
use super::stored::IopsItem;

/// One test and op (`RND4K-Q32T1 read`, `RND4K-Q4T1 write in mix:70`) over its rounds.
#[derive(Debug, Clone)]
pub struct Rounds<'a> {
    /// Each round's item, in the order run.
    pub items: Vec<&'a IopsItem>,
}

impl<'a> Rounds<'a> {
    /// The items grouped by test and op, in the order each was first run.
    pub fn of(items: &'a [IopsItem]) -> Vec<Rounds<'a>> {
        let mut groups: Vec<Rounds<'a>> = Vec::new();
        for item in items {
            match groups.iter_mut().find(|g| g.holds(item)) {
                Some(group) => group.items.push(item),
                None => groups.push(Rounds { items: vec![item] }),
            }
        }
        groups
    }

    /// Whether `item` is a round of this test and op.
    fn holds(&self, item: &IopsItem) -> bool {
        let first = self.items[0];
        first.test == item.test && first.op == item.op && first.rw == item.rw
    }

    /// The round of median IOPS; of an even number, the slower of the middle two. One
    /// round that ran, not an average of two, so a row's figures agree with each other
    /// (its mean latency is depth / IOPS, as Little's law has it).
    pub fn median(&self) -> &'a IopsItem {
        let mut by_iops = self.items.clone();
        by_iops.sort_by(|a, b| a.iops.total_cmp(&b.iops));
        by_iops[(by_iops.len() - 1) / 2]
    }

    /// The slowest and the fastest round's IOPS.
    pub fn iops_range(&self) -> (f64, f64) {
        self.items
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(min, max), item| {
                (min.min(item.iops), max.max(item.iops))
            })
    }

    /// Whether the test ran more than one round.
    pub fn repeated(&self) -> bool {
        self.items.len() > 1
    }

    /// Rounds run.
    pub fn count(&self) -> u32 {
        u32::try_from(self.items.len()).unwrap_or(u32::MAX)
    }

    /// Every round's intervals, one round after another: rounds follow each other without
    /// a ramp between them, so this is the test's counted time as the device saw it.
    pub fn intervals(&self) -> Vec<IntervalFigures> {
        self.items
            .iter()
            .flat_map(|item| item.intervals.iter().copied())
            .collect()
    }

    /// Seconds counted over every round.
    pub fn seconds(&self) -> f64 {
        self.items.iter().map(|item| item.seconds).sum()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::workload::iops::latency::Latency;
    use crate::workload::iops::{IopsOp, Order};

    /// Round `round` of `test` doing `op`: `iops` for a second, every request taking
    /// depth / IOPS (Little's law), in ten intervals.
    pub fn round(test: &str, op: IopsOp, round: u32, iops: f64) -> IopsItem {
        let block_bytes = 4096;
        let queue_depth = if test.contains("Q32") { 32 } else { 1 };
        let mut latency = Latency::new();
        let each = std::time::Duration::from_secs_f64(f64::from(queue_depth) / iops);
        latency.record(each);
        IopsItem {
            test: test.into(),
            op,
            rw: op.to_string(),
            round,
            order: Order::Random,
            block_bytes,
            queue_depth,
            threads: 1,
            seconds: 1.0,
            ios: iops as u64,
            iops,
            bytes_per_sec: iops * block_bytes as f64,
            latency_ns: latency.figures().expect("one request counted"),
            histogram: latency.encode(),
            interval_seconds: 0.1,
            intervals: vec![
                IntervalFigures {
                    ios: (iops / 10.0) as u64,
                    p50_ns: Some(each.as_nanos() as u64),
                    p99_ns: Some(each.as_nanos() as u64),
                };
                10
            ],
            cached_fraction_before: None,
            direct: true,
        }
    }

    #[test]
    fn rounds_group_by_test_and_op_and_the_median_is_a_round_that_ran() {
        let items = vec![
            round("RND4K-Q32T1", IopsOp::Read, 1, 40_000.0),
            round("RND4K-Q32T1", IopsOp::Read, 2, 42_000.0),
            round("RND4K-Q32T1", IopsOp::Read, 3, 39_000.0),
            round("RND4K-Q32T1", IopsOp::Write, 1, 30_000.0),
            round("RND4K-Q32T1", IopsOp::Write, 2, 31_000.0),
        ];
        let groups = Rounds::of(&items);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].count(), 3);
        assert_eq!(groups[0].median().round, 1);
        assert_eq!(groups[0].iops_range(), (39_000.0, 42_000.0));
        assert_eq!(groups[0].intervals().len(), 30);
        // Of two, the slower.
        assert_eq!(groups[1].median().round, 1);
        // A run stored before rounds: one item, its own median, no range to speak of.
        let old = Rounds::of(&items[3..4]);
        assert!(!old[0].repeated());
        assert_eq!(old[0].median().iops, 30_000.0);
    }
}
