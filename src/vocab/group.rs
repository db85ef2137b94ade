//! What items are compared by across runs: the key of an item's group (a disk's
//! operation and size, a cpu test's threads and class) and the unit of its rate.

use serde::{Serialize, Serializer};

use super::units::{
    format_bits_rate, format_iops, format_iops_words, format_latency, format_loops, format_rate,
    format_seconds, gbit_per_sec, mb_per_sec,
};

/// What a group's figures count (a rate per second, or a request's latency), and how
/// people read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RateUnit {
    /// Bytes per second, shown in decimal MB/s (storage, tasks).
    BytesPerSec,
    /// Bytes per second, shown in Gbit/s as network tools do.
    BytesPerSecInBits,
    /// Loops per second (cpu).
    LoopsPerSec,
    /// Requests per second (block I/O).
    Iops,
    /// A request's latency in nanoseconds (block I/O): lower is better.
    LatencyNs,
    /// A command's wall time in seconds (why's unchanged runs): lower is better.
    Seconds,
    /// How many times as long a run took changed as unchanged (why's what-ifs).
    Ratio,
}

impl RateUnit {
    /// The unit's name in JSON field names (`bytes_per_sec`).
    pub fn as_str(self) -> &'static str {
        match self {
            RateUnit::BytesPerSec | RateUnit::BytesPerSecInBits => "bytes_per_sec",
            RateUnit::LoopsPerSec => "loops_per_sec",
            RateUnit::Iops => "iops",
            RateUnit::LatencyNs => "ns",
            RateUnit::Seconds => "seconds",
            RateUnit::Ratio => "ratio",
        }
    }

    /// The unit as a column heading shows it (`MB/s`).
    pub fn words(self) -> &'static str {
        match self {
            RateUnit::BytesPerSec => "MB/s",
            RateUnit::BytesPerSecInBits => "Gbit/s",
            RateUnit::LoopsPerSec => "loops/s",
            RateUnit::Iops => "IOPS",
            RateUnit::LatencyNs => "latency",
            RateUnit::Seconds => "time",
            RateUnit::Ratio => "x as long",
        }
    }

    /// A rate in this unit in words: `412 MB/s`, `9.41 Gbit/s`, `1.234 G loops/s`.
    pub fn format(self, rate: f64) -> String {
        match self {
            RateUnit::BytesPerSec => format_rate(rate),
            RateUnit::BytesPerSecInBits => format_bits_rate(rate),
            RateUnit::LoopsPerSec => format!("{} loops/s", format_loops(rate)),
            RateUnit::Iops => format_iops_words(rate),
            RateUnit::LatencyNs => format_latency(rate),
            RateUnit::Seconds => format_seconds(rate),
            RateUnit::Ratio => format!("{rate:.2}x as long"),
        }
    }

    /// A rate in words for workloads of `units`: in their unit when they share one, in
    /// bytes and in bits (`1.20 GB/s = 9.60 Gbit/s`) when storage and network mix.
    pub fn format_for(units: &[RateUnit], rate: f64) -> String {
        match units.split_first() {
            Some((&first, rest)) if rest.iter().all(|&u| u == first) => first.format(rate),
            _ => format!("{} = {}", format_rate(rate), format_bits_rate(rate)),
        }
    }

    /// A rate in this unit as a table cell shows it.
    pub fn cell(self, rate: f64) -> String {
        match self {
            RateUnit::BytesPerSec => mb_per_sec(rate),
            RateUnit::BytesPerSecInBits => gbit_per_sec(rate),
            RateUnit::LoopsPerSec => format_loops(rate),
            RateUnit::Iops => format_iops(rate),
            RateUnit::LatencyNs => format_latency(rate),
            RateUnit::Seconds => format_seconds(rate),
            RateUnit::Ratio => format!("{rate:.2}x"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RateUnit::{self, BytesPerSec, BytesPerSecInBits};

    #[test]
    fn a_mixed_group_says_both_units() {
        assert_eq!(
            RateUnit::format_for(&[BytesPerSecInBits], 1.25e9),
            "10.0 Gbit/s"
        );
        assert_eq!(
            RateUnit::format_for(&[BytesPerSec, BytesPerSec], 1.25e9),
            "1.25 GB/s"
        );
        assert_eq!(
            RateUnit::format_for(&[BytesPerSec, BytesPerSecInBits], 1.25e9),
            "1.25 GB/s = 10.0 Gbit/s"
        );
    }
}

impl Serialize for RateUnit {
    // Stored and exported by what it counts; the way it is shown is not data.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// What a group of items measured, within one workload; fields a kind does not use are
/// `None`. Groups sort by operation (in the order first met), then size, threads, class.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupKey {
    /// The operation (`write`, `read direct`, a cpu test, a task step, `receive up`).
    pub op: String,
    /// The file size (disk), or the smallest size of a size band (readdir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The first size past a size band (readdir; `None` for the last band).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_to_bytes: Option<u64>,
    /// Whether sizes are bands (readdir) rather than exact file sizes.
    #[serde(skip)]
    pub banded: bool,
    /// Threads (cpu, task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<usize>,
    /// Scheduling class (cpu).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// What its figures count: a workload's groups may count different things (IOPS and
    /// latency). Stored as the group's `rate_unit`.
    #[serde(skip)]
    pub unit: RateUnit,
}

impl GroupKey {
    /// The key of operation `op` alone, its figures in `unit`.
    pub fn new(unit: RateUnit, op: impl Into<String>) -> GroupKey {
        GroupKey {
            unit,
            op: op.into(),
            size_bytes: None,
            size_to_bytes: None,
            banded: false,
            threads: None,
            class: None,
        }
    }
}

/// A workload's items as compared: each one's group and rate (in the group's unit), with
/// no rate for an item too short to time well.
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    /// Each item's group and rate.
    pub items: Vec<(GroupKey, Option<f64>)>,
}

/// One figure a later profile of the machine sets against an earlier one's: it is set
/// against the earlier figure of the same key only (measured the same way).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileFigure {
    /// Equal for two figures measured the same way (target, sizes, settings, op).
    pub key: String,
    /// The figure in words: `write on /data`.
    pub words: String,
    /// Its rates, one per item, for a rank test.
    pub rates: Vec<f64>,
}
