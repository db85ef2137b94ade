//! How ratelab summarises, judges and shows stored iops workloads.

use super::IopsPlan;
use super::stored::{IopsContext, IopsItem, IopsSummary, TestSummary};
use super::test::Order;
use crate::document::{Severity, Verdict};
use crate::vocab::units::{
    format_iops, format_iops_words, format_latency, format_rate, format_size,
};
use crate::vocab::{Exposure, GroupKey, RateUnit, Samples, SummaryLine, Table};
use crate::workload::{DecodeError, Kind, Stored};

/// A read that found more than this share of the file cached is flagged.
const CACHED: f64 = 0.05;

/// How ratelab summarises, judges and shows stored iops workloads.
pub struct IopsKind;

impl Kind for IopsKind {
    const NAME: &'static str = "iops";
    type Params = IopsPlan;
    type Context = IopsContext;
    type Item = IopsItem;
    type Summary = IopsSummary;

    fn exposure(&self, _w: &Stored<Self>) -> Exposure {
        Exposure::STORAGE
    }

    /// Each interval of each test and op: its IOPS, p50 and p99 latency, each a group.
    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let mut items = Vec::new();
        for item in &w.items {
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

    fn summarize(&self, w: &Stored<Self>) -> IopsSummary {
        IopsSummary {
            tests: w
                .items
                .iter()
                .map(|item| TestSummary {
                    test: item.test.clone(),
                    op: item.op.clone(),
                    iops: item.iops,
                    bytes_per_sec: item.bytes_per_sec,
                    latency_ns: item.latency_ns,
                })
                .collect(),
        }
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let verdict = Verdict::about(Some(w.index()));
        let cached: Vec<String> = w
            .items
            .iter()
            .filter(|i| i.cached_fraction_before.is_some_and(|f| f > CACHED))
            .map(|i| {
                format!(
                    "{} read ({:.0}% of the file cached before it)",
                    i.test,
                    100.0 * i.cached_fraction_before.unwrap_or_default()
                )
            })
            .collect();
        let mut verdicts = Vec::new();
        if !cached.is_empty() {
            verdicts.push(verdict(
                "iops_read_cached",
                Severity::Warning,
                format!(
                    "the page cache held part of the test file before {}: those reads may be faster than the storage",
                    cached.join(", ")
                ),
            ));
        }
        if !w.params.direct {
            verdicts.push(verdict(
                "iops_buffered",
                Severity::Info,
                "requests went through the page cache (--buffered): writes may be counted when cached, not when stored".into(),
            ));
        }
        verdicts
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let rows: Vec<Vec<String>> = w
            .items
            .iter()
            .map(|i| {
                let l = &i.latency_ns;
                vec![
                    i.test.clone(),
                    i.op_words(),
                    format!("{:.1}", i.bytes_per_sec / 1e6),
                    format_iops(i.iops),
                    format_latency(l.mean),
                    format_latency(l.p50 as f64),
                    format_latency(l.p99 as f64),
                    format_latency(l.p99_9 as f64),
                    format_latency(l.max as f64),
                ]
            })
            .collect();
        let header = [
            "test", "op", "MB/s", "IOPS", "mean", "p50", "p99", "p99.9", "max",
        ];
        vec![Table {
            title: format!(
                "block I/O on a {} file · {} · {} s a test after a {} s ramp · completion latency",
                format_size(w.params.size_bytes),
                if w.params.direct {
                    "O_DIRECT"
                } else {
                    "buffered"
                },
                w.params.seconds,
                w.params.ramp_seconds
            ),
            numeric: (2..header.len()).collect(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows,
        }]
    }

    /// A line per order and block size: sequential tests by their rate, random ones by
    /// IOPS and p99, read then write, each at its depth and threads.
    fn summary_lines(&self, w: &Stored<Self>) -> Result<Vec<SummaryLine>, DecodeError> {
        let mut groups: Vec<(Order, u64)> = Vec::new();
        for item in &w.items {
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
                for op in w.items.iter().filter(in_group).map(IopsItem::op_words) {
                    if !ops.contains(&op) {
                        ops.push(op);
                    }
                }
                ops.sort_by_key(|op| !op.starts_with("read"));
                let ops: Vec<String> = ops
                    .into_iter()
                    .filter_map(|op| {
                        let figures: Vec<String> = w
                            .items
                            .iter()
                            .filter(in_group)
                            .filter(|i| i.op_words() == op)
                            .map(|i| {
                                let at = i.test.split_once('-').map_or("", |(_, q)| q);
                                match order {
                                    Order::Sequential => {
                                        format!("{} at {at}", format_rate(i.bytes_per_sec))
                                    }
                                    Order::Random => format!(
                                        "{} at {at} (p99 {})",
                                        format_iops_words(i.iops),
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
