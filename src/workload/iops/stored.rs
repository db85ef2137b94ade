//! What an iops workload stores: one item per round of each test and direction (its
//! rates, its latency figures and histogram, what the cache held before a read), and its
//! summary.

use serde::{Deserialize, Serialize};

use super::latency::{IntervalFigures, LatencyFigures};
use super::notation::Order;

/// Which requests a figure counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IopsOp {
    /// Reads.
    Read,
    /// Writes.
    Write,
}

impl IopsOp {
    /// Its name as stored and shown: `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            IopsOp::Read => "read",
            IopsOp::Write => "write",
        }
    }
}

impl std::fmt::Display for IopsOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One round of one test in one direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IopsItem {
    /// The test as users write it: `RND4K-Q32T1`.
    pub test: String,
    /// Which of its requests it counts.
    pub op: IopsOp,
    /// What the test's requests did: `read`, `write`, or a mix (`mix:70`, 70% reads).
    pub rw: String,
    /// The round (`--repeat`), from 1; an item stored before rounds is its test's only one.
    #[serde(default = "first_round")]
    pub round: u32,
    /// Sequential or random.
    pub order: Order,
    /// Bytes per request.
    pub block_bytes: u64,
    /// Requests in flight per thread.
    pub queue_depth: u32,
    /// Threads.
    pub threads: u32,
    /// Seconds counted in the round (the first after the ramp).
    pub seconds: f64,
    /// Requests completed in them, every thread together.
    pub ios: u64,
    /// Requests per second.
    pub iops: f64,
    /// Bytes per second (MB/s are 10^6 bytes).
    pub bytes_per_sec: f64,
    /// Latency, from the moment the request's slot was free to its reaping, in ns.
    pub latency_ns: LatencyFigures,
    /// The latency histogram, hdrhistogram's V2 encoding in base64.
    pub histogram: String,
    /// The length of each interval of `intervals`, in seconds.
    #[serde(default)]
    pub interval_seconds: f64,
    /// The counted span in equal intervals, in order: each one's requests and latency.
    #[serde(default)]
    pub intervals: Vec<IntervalFigures>,
    /// For a read, the share of the file in the page cache before it began.
    #[serde(default)]
    pub cached_fraction_before: Option<f64>,
    /// Whether requests bypassed the page cache (O_DIRECT).
    pub direct: bool,
}

/// The round of an item stored before rounds: its test ran once.
fn first_round() -> u32 {
    1
}

impl IopsItem {
    /// Its op as a table shows it: `read`, or `read in mix:70` for a mix's reads.
    pub fn op_words(&self) -> String {
        if self.rw == self.op.as_str() {
            self.op.to_string()
        } else {
            format!("{} in {}", self.op, self.rw)
        }
    }
}

/// One test and op's figures in the summary: its median round's, and the range of all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSummary {
    /// The test: `RND4K-Q32T1`.
    pub test: String,
    /// Which of its requests it counts.
    pub op: IopsOp,
    /// The median round's requests per second.
    pub iops: f64,
    /// The median round's bytes per second.
    pub bytes_per_sec: f64,
    /// The median round's latency figures, in nanoseconds.
    pub latency_ns: LatencyFigures,
    /// Rounds run.
    #[serde(default = "first_round")]
    pub rounds: u32,
    /// The slowest round's requests per second.
    #[serde(default)]
    pub min_iops: f64,
    /// The fastest round's requests per second.
    #[serde(default)]
    pub max_iops: f64,
}

/// The iops workload's summary: every test and op, in the order run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IopsSummary {
    /// Each test and direction.
    pub tests: Vec<TestSummary>,
}

/// What the platform said of the target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IopsContext {
    /// The storage chain under the target, when it could be probed.
    #[serde(default)]
    pub chain: Option<crate::platform::StorageChain>,
}
