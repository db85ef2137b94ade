//! How ratelab summarises, judges and shows stored iops workloads.

use super::IopsPlan;
use super::stored::{IopsContext, IopsItem, IopsSummary, TestSummary};
use super::test::Order;
use crate::document::{Severity, Verdict};
use crate::vocab::units::{format_rate, format_size};
use crate::vocab::{Exposure, SummaryLine, Table};
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
                    i.op.clone(),
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
                let ops: Vec<String> = ["read", "write"]
                    .into_iter()
                    .filter_map(|op| {
                        let figures: Vec<String> = w
                            .items
                            .iter()
                            .filter(|i| i.order == order && i.block_bytes == block && i.op == op)
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

/// IOPS for a table cell: `41.2k`, `980`.
fn format_iops(iops: f64) -> String {
    match iops {
        r if r >= 1e6 => format!("{:.2}M", r / 1e6),
        r if r >= 1e4 => format!("{:.1}k", r / 1e3),
        r => format!("{r:.0}"),
    }
}

/// IOPS in words: `41.2k IOPS`.
fn format_iops_words(iops: f64) -> String {
    format!("{} IOPS", format_iops(iops))
}

/// A latency in nanoseconds for people: `850 ns`, `85.2 µs`, `1.23 ms`, `2.10 s`.
fn format_latency(ns: f64) -> String {
    let three = |value: f64| match value {
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 10.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    };
    match ns {
        n if n >= 1e9 => format!("{} s", three(n / 1e9)),
        n if n >= 1e6 => format!("{} ms", three(n / 1e6)),
        n if n >= 1e3 => format!("{} µs", three(n / 1e3)),
        n => format!("{n:.0} ns"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_and_iops_read_as_people_write_them() {
        assert_eq!(format_latency(850.0), "850 ns");
        assert_eq!(format_latency(85_240.0), "85.2 µs");
        assert_eq!(format_latency(1_234_000.0), "1.23 ms");
        assert_eq!(format_latency(2_100_000_000.0), "2.10 s");
        assert_eq!(format_iops(41_234.0), "41.2k");
        assert_eq!(format_iops(980.4), "980");
        assert_eq!(format_iops(1_500_000.0), "1.50M");
    }
}
