//! What a storage kind's file figures say: flags on single items (faster than the link,
//! cached, too short to time), rates per operation, mode and size, the headline figures
//! that leave out what broke the link's physics, the streaming rate a task can expect,
//! and the chart of rate by file size.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::item::{DiskItem, Op};
use crate::analysis::stats::Stats;
use crate::document::Flag;
use crate::platform::StorageChain;
use crate::vocab::LinkLimit;
use crate::vocab::chart::{Chart, Line, size_axis, size_x, spans_decades};
use crate::vocab::units::format_rate;

/// A figure above the link limit by more than this factor is flagged: the margin
/// absorbs timer and rounding error, never a cache.
pub const LINK_MARGIN: f64 = 1.05;
/// Items shorter than this are flagged `small`: scheduling noise is then a large share.
pub const SMALL_SECONDS: f64 = 100e-6;
/// A read with more than this fraction of the file resident is flagged `cached`.
pub const CACHED_FRACTION: f64 = 0.5;
/// An evicted file should have at most this fraction resident before its read.
pub const EVICTED_FRACTION: f64 = 0.01;

/// Files at least this large show a disk's streaming rate, as a task's file does.
const STREAMING_BYTES: u64 = 64 << 20;

/// The rates of `op` (`write` or `read`) over the large files of a storage series (the
/// largest size when none is large), leaving out cached reads and flagged figures: what
/// a task streaming one big file can expect.
pub fn streaming_rates(items: &[DiskItem], op: &str) -> Vec<f64> {
    let items: Vec<&DiskItem> = items
        .iter()
        .filter(|i| i.op.as_str() == op && i.mode != "cached" && i.flags.is_empty())
        .collect();
    let Some(largest) = items.iter().map(|i| i.size_bytes).max() else {
        return Vec::new();
    };
    let floor = STREAMING_BYTES.min(largest);
    items
        .iter()
        .filter(|i| i.size_bytes >= floor)
        .map(|i| i.bytes_per_sec)
        .collect()
}

/// The median of [`streaming_rates`].
pub fn streaming_rate(items: &[DiskItem], op: &str) -> Option<f64> {
    Stats::of(&streaming_rates(items, op)).map(|s| s.median)
}

/// The item with its flags set from its figures and the link limit.
pub fn flagged(mut item: DiskItem, limit_bytes_per_sec: Option<f64>) -> DiskItem {
    item.flags.clear();
    if limit_bytes_per_sec.is_some_and(|limit| item.bytes_per_sec > limit * LINK_MARGIN) {
        item.flags.push(Flag::FasterThanLink);
    }
    if item
        .most_cached_before()
        .is_some_and(|f| f > CACHED_FRACTION)
    {
        item.flags.push(Flag::Cached);
    }
    if item.seconds < SMALL_SECONDS {
        item.flags.push(Flag::Small);
    }
    item
}

/// Rate statistics of a group of items, with units in the names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSummary {
    /// Median of the items' rates.
    pub median_bytes_per_sec: f64,
    /// Lowest item rate.
    pub min_bytes_per_sec: f64,
    /// Highest item rate.
    pub max_bytes_per_sec: f64,
    /// Mean of the item rates.
    pub mean_bytes_per_sec: f64,
    /// All bytes over all timed seconds.
    pub aggregate_bytes_per_sec: f64,
    /// Number of items.
    pub n: usize,
}

impl RateSummary {
    /// The summary of `items`; `None` when there are none.
    pub fn of<'a>(items: impl IntoIterator<Item = &'a DiskItem>) -> Option<RateSummary> {
        let items: Vec<&DiskItem> = items.into_iter().collect();
        let rates: Vec<f64> = items.iter().map(|i| i.bytes_per_sec).collect();
        let stats = Stats::of(&rates)?;
        let bytes: u64 = items.iter().map(|i| i.bytes).sum();
        let seconds: f64 = items.iter().map(|i| i.seconds).sum();
        Some(RateSummary {
            median_bytes_per_sec: stats.median,
            min_bytes_per_sec: stats.min,
            max_bytes_per_sec: stats.max,
            mean_bytes_per_sec: stats.mean,
            aggregate_bytes_per_sec: if seconds > 0.0 {
                bytes as f64 / seconds
            } else {
                0.0
            },
            n: stats.n,
        })
    }
}

/// Statistics of one operation, mode and file size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeRow {
    /// Write or read.
    pub op: Op,
    /// Sync mode or read mode.
    pub mode: String,
    /// File size.
    pub size_bytes: u64,
    /// Rates of the files of this size.
    #[serde(flatten)]
    pub rates: RateSummary,
    /// Mean resident fraction before the reads; null for writes.
    pub mean_cached_fraction_before: Option<f64>,
    /// How many items carry each flag.
    pub flag_counts: BTreeMap<Flag, usize>,
}

/// Items grouped by operation, mode and size, in that order.
pub fn by_size(items: &[DiskItem]) -> Vec<SizeRow> {
    let mut groups: BTreeMap<(Op, String, u64), Vec<&DiskItem>> = BTreeMap::new();
    for item in items {
        groups
            .entry((item.op, item.mode.clone(), item.size_bytes))
            .or_default()
            .push(item);
    }
    groups
        .into_iter()
        .filter_map(|((op, mode, size_bytes), group)| {
            let fractions: Vec<f64> = group
                .iter()
                .filter_map(|i| i.cached_fraction_before)
                .collect();
            let mut flag_counts = BTreeMap::new();
            for flag in group.iter().flat_map(|i| &i.flags) {
                *flag_counts.entry(*flag).or_insert(0) += 1;
            }
            Some(SizeRow {
                op,
                mode,
                size_bytes,
                rates: RateSummary::of(group.iter().copied())?,
                mean_cached_fraction_before: Stats::of(&fractions).map(|s| s.mean),
                flag_counts,
            })
        })
        .collect()
}

/// A headline figure: the rates of the items that respect the link's physics, and
/// how many were left out because they did not (they came from a cache).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Rates of the items kept; absent when every item was left out.
    #[serde(flatten)]
    pub rates: Option<RateSummary>,
    /// Items flagged `faster_than_link`, left out of the rates.
    pub excluded_faster_than_link: usize,
}

impl Headline {
    /// The headline of `items`; `None` when there are none.
    pub fn of<'a>(items: impl IntoIterator<Item = &'a DiskItem>) -> Option<Headline> {
        let (cache, kept): (Vec<&DiskItem>, Vec<&DiskItem>) = items
            .into_iter()
            .partition(|i| i.flags.contains(&Flag::FasterThanLink));
        (!cache.is_empty() || !kept.is_empty()).then(|| Headline {
            rates: RateSummary::of(kept),
            excluded_faster_than_link: cache.len(),
        })
    }
}

/// The limit a storage workload's figures were checked against (`max_bytes_per_sec`,
/// found along `chain`), as reports list it.
pub fn link_limit(max_bytes_per_sec: Option<f64>, chain: Option<&StorageChain>) -> LinkLimit {
    match max_bytes_per_sec {
        Some(limit) => LinkLimit {
            limit: format_rate(limit),
            from: format!(
                "data rate of {}",
                chain
                    .and_then(|c| c.limit_via.as_deref())
                    .unwrap_or("its link")
            ),
        },
        None => LinkLimit::unknown(),
    }
}

/// The files of `target`: median rate per file size, with the min-max range, per
/// operation and mode.
pub fn by_size_chart(target: &str, items: &[DiskItem]) -> Option<Chart> {
    let rows = by_size(items);
    let mut lines: Vec<Line> = Vec::new();
    for row in rows {
        let name = format!("{} ({})", row.op.as_str(), row.mode);
        let line = match lines.iter_mut().find(|l| l.name == name) {
            Some(line) => line,
            None => {
                lines.push(Line {
                    name,
                    ..Line::default()
                });
                lines.last_mut().expect("just pushed")
            }
        };
        line.points
            .push((size_x(row.size_bytes), row.rates.median_bytes_per_sec));
        line.ranges
            .push((row.rates.min_bytes_per_sec, row.rates.max_bytes_per_sec));
    }
    // Small files run decades slower than large ones: on a linear axis they sit on zero.
    let y_log = spans_decades(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    Some(Chart {
        title: format!("{}: rate by file size (median, min-max)", target),
        x_label: "file size".into(),
        y_label: if y_log { "rate (log scale)" } else { "rate" }.into(),
        x_log: false,
        y_log,
        x_format: size_axis,
        y_format: format_rate,
        lines,
        spans: Vec::new(),
        categories: Vec::new(),
    })
    .filter(|c| !c.lines.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::item::tests::item;

    #[test]
    fn flags_follow_the_figures() {
        let fast = flagged(
            item(Op::Read, "flushed", 1 << 30, 9e9, Some(0.9)),
            Some(6e8),
        );
        assert_eq!(fast.flags, vec![Flag::FasterThanLink, Flag::Cached]);
        let honest = flagged(
            item(Op::Read, "direct", 1 << 30, 5.9e8, Some(0.0)),
            Some(6e8),
        );
        assert!(honest.flags.is_empty());
        let tiny = flagged(item(Op::Write, "fsync", 4096, 1e9, None), None);
        assert_eq!(tiny.flags, vec![Flag::Small]);
    }
}
