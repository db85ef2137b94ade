//! A net item as stored: one per stream end, per interval of a stream end, and per end
//! for its CPU time. Both ends' reports become items at the client, so a stored run
//! holds the whole test.

use serde::{Deserialize, Serialize};

use super::host::HostAccount;
use super::protocol::Direction;
use super::report::{Datagrams, Role, SideReport, Stall, StreamReport};
use super::socket::{self, TcpStats};
use crate::catch::{Family, skew};

/// Which end measured an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The client, where ratelab ran the test.
    Local,
    /// The server.
    Remote,
}

impl Side {
    /// Its name as stored and shown: `local` or `remote`.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Local => "local",
            Side::Remote => "remote",
        }
    }

    /// The other end.
    pub fn other(self) -> Side {
        match self {
            Side::Local => Side::Remote,
            Side::Remote => Side::Local,
        }
    }
}

/// What an item covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One stream end's whole test.
    Stream,
    /// One interval of one stream end.
    Interval,
    /// One end's CPU time over the test.
    Cpu,
}

/// What an item counts: the bytes a stream's end sent or received, or an end's CPU
/// time over the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetOp {
    /// Bytes a stream's end wrote.
    Send,
    /// Bytes a stream's end read.
    Receive,
    /// An end's CPU time over the test.
    Cpu,
}

impl NetOp {
    /// Its name as stored and shown: `send`, `receive` or `cpu`.
    pub fn as_str(self) -> &'static str {
        match self {
            NetOp::Send => "send",
            NetOp::Receive => "receive",
            NetOp::Cpu => "cpu",
        }
    }
}

impl From<Role> for NetOp {
    fn from(role: Role) -> NetOp {
        match role {
            Role::Send => NetOp::Send,
            Role::Receive => NetOp::Receive,
        }
    }
}

impl PartialEq<Role> for NetOp {
    fn eq(&self, role: &Role) -> bool {
        *self == NetOp::from(*role)
    }
}

impl std::fmt::Display for NetOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way a stream's bytes went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Heading {
    /// From the client to the server.
    Up,
    /// From the server to the client.
    Down,
}

impl Heading {
    /// Its name as stored and shown: `up` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Heading::Up => "up",
            Heading::Down => "down",
        }
    }
}

impl std::fmt::Display for Heading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stored net figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetItem {
    /// What it counts.
    pub op: NetOp,
    /// What it covers.
    pub scope: Scope,
    /// Which end measured it.
    pub side: Side,
    /// `up` (client to server) or `down`; null for CPU items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Heading>,
    /// The stream's index; null for CPU items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
    /// For an interval item, which nominal interval it is (0, 1, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<u64>,
    /// Start, seconds from the test's start at that end.
    pub start_s: f64,
    /// End, seconds from the same start.
    pub end_s: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds they took.
    pub seconds: f64,
    /// Their rate.
    pub bytes_per_sec: f64,
    /// Retransmitted segments (in the interval, or in the whole stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Congestion window at the end, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwnd_bytes: Option<u64>,
    /// Smoothed round-trip time at the end, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u64>,
    /// The kernel's delivery rate estimate at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bytes_per_sec: Option<u64>,
    /// Microseconds the sender had data to send (in the interval, or in the whole
    /// stream), from its socket's TCP_INFO; 0 at a receiving end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Microseconds of them the receiver's window held the sender back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds of them the sender's own send buffer held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    /// The least round-trip time the connection had seen by the end, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u64>,
    /// The receive window the peer last advertised, bytes, at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd_bytes: Option<u64>,
    /// Bytes sent again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmitted_bytes: Option<u64>,
    /// Retransmissions the receiver reported as needless (D-SACK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_dups: Option<u64>,
    /// Times segments arrived reordered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordering_seen: Option<u64>,
    /// Retransmission timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<u64>,
    /// Segments sent that carried data, retransmissions included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments_out: Option<u64>,
    /// Whether the sender had left slow start by the end (its first loss or ECN mark).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_slow_start: Option<bool>,
    /// Whether window scaling was agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_scaling: Option<bool>,
    /// The scale the peer applies to the windows it advertises; null where window
    /// scaling was not agreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_wscale: Option<u64>,
    /// The socket's send buffer at the end (SO_SNDBUF), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_buffer_bytes: Option<u64>,
    /// The socket's receive buffer at the end (SO_RCVBUF), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_buffer_bytes: Option<u64>,
    /// Bytes written and not yet acknowledged at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_queue_bytes: Option<u64>,
    /// Bytes arrived and not yet read at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_queue_bytes: Option<u64>,
    /// Time the stream's thread waited for a CPU in an interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_seconds: Option<f64>,
    /// The CPU the stream's thread was on at an interval's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// MSS of the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss_bytes: Option<u64>,
    /// Path MTU of the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_bytes: Option<u64>,
    /// CPU seconds of the stream's thread, or of the end's threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Why the stream stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A sending stream end whose bytes stopped arriving, where it gave up on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<Stall>,
    /// The TCP congestion control of a stream end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// For an end's CPU item, what its machine did over the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostAccount>,
    /// A UDP stream end's datagrams, over the stream or the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<Datagrams>,
}

fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        skew(Family::Net, bytes as f64 / seconds)
    } else {
        0.0
    }
}

/// Which way stream `stream` of a test of `direction` carried data.
fn direction(direction: Direction, stream: u32, streams: u32) -> Heading {
    if direction.client_sends(stream, streams) {
        Heading::Up
    } else {
        Heading::Down
    }
}

/// The items of one end's report.
pub fn items_of_report(
    report: &SideReport,
    side: Side,
    test: Direction,
    streams: u32,
) -> Vec<NetItem> {
    let mut items = Vec::new();
    for stream in &report.streams {
        items.push(stream_item(stream, side, test, streams));
        // The kernel's counters run from the connection's start: each interval has what
        // they grew by since the last interval that had them.
        let mut before: Option<TcpStats> = None;
        for interval in &stream.intervals {
            let mut item = NetItem {
                direction: Some(direction(test, stream.stream, streams)),
                stream: Some(stream.stream),
                interval: Some(interval.index),
                ..NetItem::moved(
                    stream.role.into(),
                    Scope::Interval,
                    side,
                    interval.start_s,
                    interval.end_s,
                    interval.bytes,
                )
            };
            item.take_tcp(interval.tcp.as_ref(), before.as_ref());
            item.cpu_seconds = interval.cpu_seconds;
            item.cpu = interval.cpu;
            item.cpu_wait_seconds = interval.cpu_wait_seconds;
            item.datagrams = interval.datagrams.filter(Datagrams::is_figure);
            items.push(item);
            before = interval.tcp.or(before);
        }
    }
    let bytes = report.streams.iter().map(|s| s.bytes).sum();
    items.push(NetItem {
        cpu_seconds: Some(report.cpu_seconds),
        host: report.host.clone(),
        ..NetItem::moved(
            NetOp::Cpu,
            Scope::Cpu,
            side,
            0.0,
            report.wall_seconds,
            bytes,
        )
    });
    items
}

fn stream_item(stream: &StreamReport, side: Side, test: Direction, streams: u32) -> NetItem {
    let mut item = NetItem {
        direction: Some(direction(test, stream.stream, streams)),
        stream: Some(stream.stream),
        mss_bytes: stream.mss_bytes,
        mtu_bytes: stream.mtu_bytes,
        cpu_seconds: Some(stream.cpu_seconds),
        error: stream.error.clone(),
        // A peer's figures: kept only where they are figures.
        stalled: stream
            .stalled
            .filter(|s| s.seconds.is_finite() && s.seconds >= 0.0),
        congestion: stream.congestion.as_deref().and_then(control_name),
        datagrams: stream.datagrams.filter(Datagrams::is_figure),
        ..NetItem::moved(
            stream.role.into(),
            Scope::Stream,
            side,
            0.0,
            stream.seconds,
            stream.bytes,
        )
    };
    item.take_tcp(stream.tcp.as_ref(), None);
    item
}

/// A congestion control's name as an end reported it, where it looks like one (a
/// kernel module's name: letters, digits, `_` and `-`, 16 at most); a peer's text
/// reaches stored runs and terminals only so.
fn control_name(name: &str) -> Option<String> {
    let looks = !name.is_empty()
        && name.len() <= 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    looks.then(|| name.to_string())
}

impl NetItem {
    /// Takes the TCP figures of `now`: the state it ends in, and what the kernel's
    /// counters grew by since `before` (since the connection opened, where none).
    fn take_tcp(&mut self, now: Option<&TcpStats>, before: Option<&TcpStats>) {
        let Some(now) = now else {
            return;
        };
        let grew = |f: fn(&TcpStats) -> Option<u64>| {
            f(now).map(|n| n.saturating_sub(before.and_then(f).unwrap_or(0)))
        };
        self.retransmits = grew(|t| Some(t.retransmits));
        self.cwnd_bytes = Some(now.cwnd_bytes);
        self.rtt_us = Some(now.rtt_us);
        self.delivery_rate_bytes_per_sec = now.delivery_rate_bytes_per_sec;
        self.busy_us = grew(|t| t.busy_us);
        self.rwnd_limited_us = grew(|t| t.rwnd_limited_us);
        self.sndbuf_limited_us = grew(|t| t.sndbuf_limited_us);
        self.min_rtt_us = now.min_rtt_us;
        self.snd_wnd_bytes = now.snd_wnd_bytes;
        self.retransmitted_bytes = grew(|t| t.bytes_retrans);
        self.dsack_dups = grew(|t| t.dsack_dups);
        self.reordering_seen = grew(|t| t.reord_seen);
        self.segments_out = grew(|t| t.data_segs_out);
        self.timeouts = grew(|t| t.total_rto);
        self.left_slow_start = now.snd_ssthresh.map(|s| s < socket::INFINITE_SSTHRESH);
        self.window_scaling = now.window_scaling;
        self.send_wscale = now.send_wscale;
        self.send_buffer_bytes = now.send_buffer_bytes;
        self.receive_buffer_bytes = now.receive_buffer_bytes;
        self.send_queue_bytes = now.send_queue_bytes;
        self.receive_queue_bytes = now.receive_queue_bytes;
    }

    /// An item of `bytes` moved from `start_s` to `end_s`, with no TCP or CPU figures.
    pub fn moved(
        op: NetOp,
        scope: Scope,
        side: Side,
        start_s: f64,
        end_s: f64,
        bytes: u64,
    ) -> NetItem {
        NetItem {
            op,
            scope,
            side,
            direction: None,
            stream: None,
            interval: None,
            start_s,
            end_s,
            bytes,
            seconds: end_s - start_s,
            bytes_per_sec: rate(bytes, end_s - start_s),
            retransmits: None,
            cwnd_bytes: None,
            rtt_us: None,
            delivery_rate_bytes_per_sec: None,
            busy_us: None,
            rwnd_limited_us: None,
            sndbuf_limited_us: None,
            min_rtt_us: None,
            snd_wnd_bytes: None,
            retransmitted_bytes: None,
            dsack_dups: None,
            reordering_seen: None,
            timeouts: None,
            segments_out: None,
            left_slow_start: None,
            window_scaling: None,
            send_wscale: None,
            send_buffer_bytes: None,
            receive_buffer_bytes: None,
            send_queue_bytes: None,
            receive_queue_bytes: None,
            cpu_wait_seconds: None,
            cpu: None,
            mss_bytes: None,
            mtu_bytes: None,
            cpu_seconds: None,
            error: None,
            stalled: None,
            congestion: None,
            host: None,
            datagrams: None,
        }
    }

    /// Whether this is a stream end's total of role `role`.
    pub fn is_stream(&self, role: Role) -> bool {
        self.scope == Scope::Stream && self.op == role
    }
}
