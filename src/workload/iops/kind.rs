//! How ratelab summarises, judges and shows stored iops workloads.

use super::IopsPlan;
use super::stored::{IopsContext, IopsItem, IopsSummary, TestSummary};
use super::test::Order;
use crate::document::Verdict;
use crate::vocab::units::{
    format_iops, format_iops_words, format_latency, format_rate, format_size,
};
use crate::vocab::{
    Chart, Exposure, GroupKey, LinkLimit, ProfileFigure, RateUnit, Samples, SummaryLine, Table,
};
use crate::workload::{DecodeError, Kind, Stored};

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

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        vec![super::chart::percentile_chart(&w.items)]
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
        super::verdicts::verdicts(w)
    }

    fn link_limit(&self, w: &Stored<Self>) -> Option<LinkLimit> {
        let chain = w.context.chain.as_ref();
        Some(crate::storage::rates::link_limit(
            chain.and_then(|c| c.max_bytes_per_sec),
            chain,
        ))
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
                "block I/O on a {} file · {} · {} s a test (+{} s ramp) · latency",
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

    /// The table without its rarest figures (p99.9, max), to fit 80 columns.
    fn brief_tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let keep = ["test", "op", "MB/s", "IOPS", "mean", "p50", "p99"];
        self.tables(w)
            .into_iter()
            .map(|table| table.keep_columns(&keep))
            .collect()
    }

    /// Each test's IOPS per interval, keyed by the target and everything that sets them.
    fn profile_figures(&self, w: &Stored<Self>) -> Vec<ProfileFigure> {
        let p = &w.params;
        w.items
            .iter()
            .map(|item| {
                let settings = serde_json::to_string(&(
                    &w.record.target,
                    p.size_bytes,
                    p.seconds,
                    p.ramp_seconds,
                    p.direct,
                ))
                .expect("settings serialise");
                let what = format!("{} {}", item.test, item.op_words());
                ProfileFigure {
                    key: format!("iops {what} {settings}"),
                    words: format!("{what} IOPS on {}", w.record.target),
                    rates: item
                        .intervals
                        .iter()
                        .map(|i| i.ios as f64 / item.interval_seconds)
                        .collect(),
                }
            })
            .collect()
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
