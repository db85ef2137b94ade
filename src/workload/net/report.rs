//! What one end of a test measured: per stream its totals, intervals and TCP state, and
//! the CPU time the end spent. The server sends its report to the client, which stores
//! both ends' as items.

use serde::{Deserialize, Serialize};

use super::protocol::Direction;
use super::socket::TcpStats;

/// Whether a stream's end sent or received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// It wrote data.
    Send,
    /// It read data.
    Receive,
}

impl Role {
    /// What the client does on stream `stream` of a test in `direction` with `streams`
    /// per direction.
    pub fn at_client(direction: Direction, stream: u32, streams: u32) -> Role {
        if direction.client_sends(stream, streams) {
            Role::Send
        } else {
            Role::Receive
        }
    }

    /// What the server does on that stream: the other half.
    pub fn at_server(direction: Direction, stream: u32, streams: u32) -> Role {
        match Role::at_client(direction, stream, streams) {
            Role::Send => Role::Receive,
            Role::Receive => Role::Send,
        }
    }

    /// The name stored as an item's `op`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Send => "send",
            Role::Receive => "receive",
        }
    }
}

/// One interval of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Which nominal interval it is (the k-th of --interval's length); every stream's
    /// k-th interval covers the same stretch of the test.
    pub index: u64,
    /// Start, seconds from the test's start at this end.
    pub start_s: f64,
    /// End, seconds from the same start.
    pub end_s: f64,
    /// Bytes moved in the interval.
    pub bytes: u64,
    /// TCP state at the interval's end.
    pub tcp: Option<TcpStats>,
}

/// One stream's end of a test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamReport {
    /// The stream's index.
    pub stream: u32,
    /// Whether this end sent or received.
    pub role: Role,
    /// Bytes moved in all.
    pub bytes: u64,
    /// From the test's start to the last byte written (sender) or to the end of the
    /// stream (receiver).
    pub seconds: f64,
    /// Per-interval figures.
    pub intervals: Vec<Interval>,
    /// TCP state when the stream ended.
    pub tcp: Option<TcpStats>,
    /// The MSS the connection used.
    pub mss_bytes: Option<u64>,
    /// The path MTU of the connection.
    pub mtu_bytes: Option<u64>,
    /// CPU time of the stream's thread.
    pub cpu_seconds: f64,
    /// Why the stream stopped early, if it did.
    pub error: Option<String>,
}

/// Everything one end measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    /// One report per stream this end served.
    pub streams: Vec<StreamReport>,
    /// CPU time of this end's stream threads together.
    pub cpu_seconds: f64,
    /// Wall time from the test's start to its last stream's end.
    pub wall_seconds: f64,
}

impl SideReport {
    /// Bytes this end's streams of `role` moved, together.
    pub fn moved(&self, role: Role) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.role == role)
            .map(|s| s.bytes)
            .sum()
    }

    /// The report of `streams`; the end's wall time is its longest stream's.
    pub fn of(streams: Vec<StreamReport>) -> SideReport {
        SideReport {
            cpu_seconds: streams.iter().map(|s| s.cpu_seconds).sum(),
            wall_seconds: streams.iter().map(|s| s.seconds).fold(0.0, f64::max),
            streams,
        }
    }
}
