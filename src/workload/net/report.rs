//! What one end of a test measured: per stream its totals, intervals and TCP state, and
//! the CPU time the end spent. The server sends its report to the client, which stores
//! both ends' as items.

use serde::{Deserialize, Serialize};

use super::host::HostAccount;
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
    /// CPU time of the stream's thread in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Time the stream's thread was runnable and waited for a CPU in the interval (a
    /// busy core, or its end's CPU quota spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_seconds: Option<f64>,
    /// The CPU the stream's thread was on at the interval's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    /// A UDP stream's datagrams in the interval (its jitter as at the interval's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<Datagrams>,
}

/// A UDP stream's datagrams at one end, over the whole stream or one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Datagrams {
    /// Datagrams sent (a sender) or received (a receiver).
    pub count: u64,
    /// The highest count received: the datagrams the sender had sent up to the last
    /// that came (iperf3's receiver reports it as the stream's packets).
    #[serde(default)]
    pub highest: u64,
    /// Datagrams lost, as iperf3 counts them: where the count skipped, less those that
    /// came late.
    #[serde(default)]
    pub lost: u64,
    /// Datagrams that came after one with a higher count; `None` where the far end
    /// does not say (iperf3's results carry no such count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
    /// RFC 3550's running jitter, in seconds.
    #[serde(default)]
    pub jitter_s: f64,
    /// Sends the sender's socket refused for want of room (ENOBUFS, EAGAIN).
    #[serde(default)]
    pub send_errors: u64,
}

impl Datagrams {
    /// A receiver's figures from its tally.
    pub fn of(tally: &super::datagram::Tally) -> Datagrams {
        Datagrams {
            count: tally.datagrams,
            highest: tally.highest,
            lost: tally.lost,
            out_of_order: Some(tally.out_of_order),
            jitter_s: tally.jitter_s,
            send_errors: 0,
        }
    }

    /// Whether these are figures at all: a peer's jitter may be anything.
    pub fn is_figure(&self) -> bool {
        self.jitter_s.is_finite() && self.jitter_s >= 0.0
    }

    /// The figures since `earlier`, the jitter as it is now.
    pub fn since(&self, earlier: &Datagrams) -> Datagrams {
        Datagrams {
            count: self.count.saturating_sub(earlier.count),
            highest: self.highest.saturating_sub(earlier.highest),
            lost: self.lost.saturating_sub(earlier.lost),
            out_of_order: self
                .out_of_order
                .map(|n| n.saturating_sub(earlier.out_of_order.unwrap_or(0))),
            jitter_s: self.jitter_s,
            send_errors: self.send_errors.saturating_sub(earlier.send_errors),
        }
    }
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
    /// The congestion control the connection used at this end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// A sender whose bytes stopped arriving, where it gave up on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalled: Option<Stall>,
    /// A receiver whose sender reset the stream during the test.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// A UDP stream's datagrams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<Datagrams>,
}

impl StreamReport {
    /// Stream `stream`'s end in `role` that moved `bytes` in `seconds`, with nothing else
    /// measured: no intervals, TCP state, CPU or datagrams.
    pub fn moved(stream: u32, role: Role, bytes: u64, seconds: f64) -> StreamReport {
        StreamReport {
            stream,
            role,
            bytes,
            seconds,
            intervals: Vec::new(),
            tcp: None,
            mss_bytes: None,
            mtu_bytes: None,
            cpu_seconds: 0.0,
            error: None,
            congestion: None,
            stalled: None,
            reset: false,
            datagrams: None,
        }
    }
}

/// A sender whose bytes stopped arriving: nothing acknowledged while its retransmission
/// timer fired again and again.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// Bytes sent and still unacknowledged when the stream gave up.
    pub unacknowledged_bytes: u64,
    /// Seconds nothing was acknowledged before it gave up.
    pub seconds: f64,
    /// Times in a row the retransmission timer fired with nothing acknowledged.
    pub timeouts: u8,
    /// Whether a new connection's handshake with the same peer crossed meanwhile: small
    /// packets arrived where the stream's full segments did not.
    pub handshake_crossed: bool,
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
    /// What the end's machine did meanwhile; null from an end that does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostAccount>,
}

impl SideReport {
    /// Bytes this end's streams of `role` moved, together.
    pub fn moved(&self, role: Role) -> u64 {
        // A peer's counts: summed without wrapping.
        self.streams
            .iter()
            .filter(|s| s.role == role)
            .fold(0u64, |sum, s| sum.saturating_add(s.bytes))
    }

    /// The report as it came from a peer, its text made data: every control character
    /// in a stream's error or congestion control written as an escape.
    pub fn with_text_escaped(mut self) -> SideReport {
        let escape = |text: &mut Option<String>| {
            if let Some(t) = text.as_mut() {
                *t = crate::vocab::text::escaped(t).into_owned();
            }
        };
        for stream in &mut self.streams {
            escape(&mut stream.error);
            escape(&mut stream.congestion);
        }
        self
    }

    /// The report of `streams`; the end's wall time is its longest stream's.
    pub fn of(streams: Vec<StreamReport>) -> SideReport {
        SideReport {
            cpu_seconds: streams.iter().map(|s| s.cpu_seconds).sum(),
            wall_seconds: streams.iter().map(|s| s.seconds).fold(0.0, f64::max),
            streams,
            host: None,
        }
    }
}

/// Where the two ends of one test disagree, said from this end (`local`): a stream one
/// end has and the other lacks, a stream both ends sent or received on, a receiver that
/// counted more than its sender sent (its rows come from two connections), or a
/// sender whose bytes its receiver never counted. A receiver may count one block of
/// `block_bytes` more than its sender: iperf 3.16 and later stop a sender's thread in
/// the middle of a write, which then goes out uncounted. A sender may count more than
/// its receiver by what the socket buffers between them hold, `held_bytes` (an iperf3
/// sender counts what it wrote, an iperf3 receiver what it read), and no more. None
/// when they agree: a run is complete only then.
pub fn disagreement(
    local: &SideReport,
    remote: &SideReport,
    block_bytes: u64,
    held_bytes: u64,
) -> Option<String> {
    for ours in &local.streams {
        let Some(theirs) = remote.streams.iter().find(|s| s.stream == ours.stream) else {
            return Some(format!(
                "stream {}: the other end has no report of it",
                ours.stream
            ));
        };
        if ours.role == theirs.role {
            return Some(format!(
                "stream {}: both ends say they {} on it",
                ours.stream,
                ours.role.as_str()
            ));
        }
        let ends = match ours.role {
            Role::Send => Ends {
                sender: ours,
                receiver: theirs,
                local_sent: true,
            },
            Role::Receive => Ends {
                sender: theirs,
                receiver: ours,
                local_sent: false,
            },
        };
        let apart = if ends.sender.datagrams.is_some() && ends.receiver.datagrams.is_some() {
            datagrams_disagree(&ends, block_bytes, held_bytes)
        } else {
            bytes_disagree(&ends, block_bytes, held_bytes)
        };
        if apart.is_some() {
            return apart;
        }
    }
    remote
        .streams
        .iter()
        .find(|theirs| !local.streams.iter().any(|s| s.stream == theirs.stream))
        .map(|theirs| format!("stream {}: this end has no report of it", theirs.stream))
}

/// How one end of a stream is named, said from this end.
fn end_name(local_end: bool) -> &'static str {
    if local_end {
        "this end"
    } else {
        "the other end"
    }
}

/// Where a TCP stream's two ends disagree: a receiver that counted more than its
/// sender sent, beyond a block, a sender whose bytes its receiver never counted, or
/// two counts further apart than the socket buffers between them hold.
fn bytes_disagree(ends: &Ends, block_bytes: u64, held_bytes: u64) -> Option<String> {
    let (sender, receiver, local_sent) = (ends.sender, ends.receiver, ends.local_sent);
    let stream = sender.stream;
    if receiver.bytes > sender.bytes.saturating_add(block_bytes) {
        return Some(format!(
            "stream {stream}: {} received {} bytes, more than the {} {} sent",
            end_name(!local_sent),
            receiver.bytes,
            sender.bytes,
            end_name(local_sent)
        ));
    }
    if sender.bytes > 0 && receiver.bytes == 0 {
        return Some(format!(
            "stream {stream}: {} sent {} bytes and {} received none",
            end_name(local_sent),
            sender.bytes,
            end_name(!local_sent)
        ));
    }
    let apart = sender.bytes - sender.bytes.min(receiver.bytes);
    if apart > held_bytes.saturating_add(block_bytes) {
        return Some(format!(
            "stream {stream}: {} sent {} and {} received {}, further apart than the socket \
             buffers between them hold ({} at most)",
            end_name(local_sent),
            crate::vocab::units::format_bytes(sender.bytes),
            end_name(!local_sent),
            crate::vocab::units::format_bytes(receiver.bytes),
            crate::vocab::units::format_size(held_bytes)
        ));
    }
    None
}

/// A stream's two ends, and whether this end is its sender.
struct Ends<'a> {
    sender: &'a StreamReport,
    receiver: &'a StreamReport,
    local_sent: bool,
}

/// Where a UDP stream's two ends disagree (see [`datagrams_apart`]), or its datagrams
/// sent after the last its receiver saw are more than the buffers between the ends
/// hold: in flight or lost at the test's end, no more.
fn datagrams_disagree(ends: &Ends, block_bytes: u64, held_bytes: u64) -> Option<String> {
    let (sent, came) = (ends.sender.datagrams?, ends.receiver.datagrams?);
    let words = |what: String| {
        Some(format!(
            "stream {}: {} sent {} datagrams ({}) and {} {what}",
            ends.sender.stream,
            end_name(ends.local_sent),
            sent.count,
            crate::vocab::units::format_bytes(ends.sender.bytes),
            end_name(!ends.local_sent),
        ))
    };
    if let Some(what) = datagrams_apart(&sent, ends.sender.bytes, &came, ends.receiver.bytes) {
        return words(what);
    }
    let tail = sent.count - came.highest;
    if tail.saturating_mul(block_bytes) > held_bytes.saturating_add(block_bytes) {
        return words(format!(
            "saw none after count {}: {tail} datagrams, more than the socket buffers \
             between them hold ({} at most)",
            came.highest,
            crate::vocab::units::format_size(held_bytes)
        ));
    }
    None
}

/// Where a UDP receiver's count cannot follow from its sender's: a higher count than
/// was sent, more datagrams or bytes than were sent, none at all from a sender that
/// sent, or a tally that does not add up (received and lost past the highest count).
fn datagrams_apart(
    sent: &Datagrams,
    sent_bytes: u64,
    came: &Datagrams,
    came_bytes: u64,
) -> Option<String> {
    if came.highest > sent.count {
        return Some(format!("saw count {}", came.highest));
    }
    if came.count > sent.count || came_bytes > sent_bytes {
        return Some(format!(
            "received {} datagrams ({})",
            came.count,
            crate::vocab::units::format_bytes(came_bytes)
        ));
    }
    if sent.count > 0 && came.count == 0 {
        return Some("received none".into());
    }
    // Lost ones are below the highest count; out-of-order ones took back a loss each.
    if came.count.saturating_add(came.lost)
        > came.highest.saturating_add(came.out_of_order.unwrap_or(0))
    {
        return Some(format!(
            "counted {} received and {} lost up to count {}",
            came.count, came.lost, came.highest
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(streams: &[(u32, Role, u64)]) -> SideReport {
        SideReport::of(
            streams
                .iter()
                .map(|&(stream, role, bytes)| StreamReport::moved(stream, role, bytes, 1.0))
                .collect(),
        )
    }

    #[test]
    fn two_ends_agree_only_stream_by_stream() {
        use Role::{Receive, Send};
        let local = end(&[(0, Receive, 100), (1, Send, 50)]);
        assert_eq!(
            disagreement(&local, &end(&[(0, Send, 100), (1, Receive, 49)]), 0, 100),
            None
        );
        // One block counted by the receiver and not by its sender is iperf3's way.
        assert_eq!(
            disagreement(&local, &end(&[(0, Send, 90), (1, Receive, 49)]), 10, 100),
            None
        );
        let said =
            |remote: &[(u32, Role, u64)]| disagreement(&local, &end(remote), 0, 100).unwrap();
        assert!(said(&[(0, Send, 100)]).contains("stream 1: the other end has no report"));
        assert!(
            said(&[(0, Receive, 100), (1, Receive, 50)]).contains("both ends say they receive")
        );
        assert!(
            said(&[(0, Send, 99), (1, Receive, 50)])
                .contains("this end received 100 bytes, more than the 99 the other end sent")
        );
        assert!(
            said(&[(0, Send, 100), (1, Receive, 0)])
                .contains("stream 1: this end sent 50 bytes and the other end received none")
        );
        assert!(
            said(&[(0, Send, 100), (1, Receive, 50), (2, Send, 1)])
                .contains("stream 2: this end has no report")
        );
        // A peer that claims it received 1 byte of what this end sent: more apart than
        // the buffers between them hold.
        let sent = end(&[(0, Send, 3_500_000_000)]);
        let claim = disagreement(&sent, &end(&[(0, Receive, 1)]), 0, 64 << 20).unwrap();
        assert!(
            claim.contains("this end sent 3.26 GiB and the other end received 1 B, further apart")
                && claim.contains("(64 MiB at most)"),
            "{claim}"
        );
        let held = disagreement(&sent, &end(&[(0, Receive, 3_450_000_000)]), 0, 64 << 20);
        assert_eq!(held, None);
    }
}
