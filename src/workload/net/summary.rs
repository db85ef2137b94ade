//! The statistics of a net test, as stored in a workload's `summary`: sender and
//! receiver totals (the receiver's is the headline, as iperf3's), interval statistics,
//! both ends' CPU, and the result as a share of the link's goodput limit.

use super::item::Heading;
use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::NetPlan;
use super::context::NetContext;
use super::item::{NetItem, Scope, Side};
use super::limit::{self, Limit};
use super::protocol::Direction;
use super::report::{Datagrams, Role};
use crate::analysis::stats::Stats;
use crate::catch::{Family, skew};

/// What a net test measured, in sum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetSummary {
    /// Every sending stream end together; null when none sent.
    pub send: Option<Totals>,
    /// Every receiving stream end together: the headline; null when none received.
    pub receive: Option<Totals>,
    /// Streams per direction.
    pub streams: u32,
    /// The MSS of the connections.
    pub mss_bytes: Option<u64>,
    /// The path MTU of the connections.
    pub mtu_bytes: Option<u64>,
    /// Segments the senders retransmitted.
    pub retransmits: u64,
    /// Both ends' CPU time over the test.
    pub cpu: CpuFractions,
    /// The link's goodput limit for the test (both directions of a bidir test).
    pub goodput_limit_bytes_per_sec: Option<f64>,
    /// The received rate over that limit.
    pub share_of_goodput_limit: Option<f64>,
    /// Client to server, for a test in both directions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<DirectionTotals>,
    /// Server to client, for a test in both directions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<DirectionTotals>,
    /// Why the test ran at its rate (of a test in one direction; each direction of a
    /// test in both has its own); null in runs stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// Each end's CPU time over the test, as a share of one core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuFractions {
    /// The client's threads.
    pub local_fraction: Option<f64>,
    /// The server's threads.
    pub remote_fraction: Option<f64>,
}

/// The totals of one direction of a test in both directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionTotals {
    /// Its senders; null when none sent.
    pub send: Option<Totals>,
    /// Its receivers; null when none received.
    pub receive: Option<Totals>,
    /// Why it ran at its rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

/// Totals of one role (all senders, or all receivers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Bytes moved by every stream.
    pub bytes: u64,
    /// The longest stream's time.
    pub seconds: f64,
    /// All bytes over the longest stream's time: the headline figure.
    pub bytes_per_sec: f64,
    /// Statistics of the interval rates, summed over streams; full intervals only.
    pub intervals: Option<Stats>,
    /// A UDP test's datagrams of these stream ends together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<DatagramTotals>,
}

/// A UDP test's datagrams of one role (all senders, or all receivers), as iperf3 sums
/// them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatagramTotals {
    /// Datagrams sent (senders) or received (receivers).
    pub count: u64,
    /// Datagrams the receivers counted lost.
    #[serde(default)]
    pub lost: u64,
    /// The lost over the datagrams sent (the senders' count where known, else the
    /// receivers' highest counts): iperf3's "Lost/Total".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_share: Option<f64>,
    /// Datagrams that came out of order, where the receivers counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_order: Option<u64>,
    /// The receivers' jitter at the end, averaged over streams as iperf3 does, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_s: Option<f64>,
    /// Sends the senders' sockets refused for want of room.
    #[serde(default)]
    pub send_errors: u64,
}

/// The summary of a test run as `plan` over the path `context`, from its items.
pub fn summarize(plan: &NetPlan, context: &NetContext, items: &[NetItem]) -> NetSummary {
    let nominal_s = nominal_s(plan);
    let mut receive = totals(items, Role::Receive, None, nominal_s);
    let send = totals(items, Role::Send, None, nominal_s);
    lost_over_sent(&mut receive, send.as_ref());
    let limit = limit(plan, context);
    // The received rate; the sent one where the receiver's report never came (a
    // stream whose bytes stopped arriving), so such a run still says why.
    let limit_of = |direction, receive: Option<&Totals>, send: Option<&Totals>| {
        // The TCP accounts say nothing of a UDP test.
        if plan.udp.is_some() {
            return None;
        }
        limit::limit_of(
            items,
            direction,
            receive.or(send)?.bytes_per_sec,
            nominal_s,
            context,
            context.goodput_limit_bytes_per_sec,
            plan.window_bytes.is_some(),
        )
    };
    let of_direction = |direction| {
        (plan.direction == Direction::Bidir).then(|| {
            let mut receive = totals(items, Role::Receive, Some(direction), nominal_s);
            let send = totals(items, Role::Send, Some(direction), nominal_s);
            lost_over_sent(&mut receive, send.as_ref());
            DirectionTotals {
                limit: limit_of(direction, receive.as_ref(), send.as_ref()),
                send,
                receive,
            }
        })
    };
    let one_way = match plan.direction {
        Direction::Bidir => None,
        Direction::Reverse => Some(Heading::Down),
        _ => Some(Heading::Up),
    };
    NetSummary {
        streams: plan.streams,
        mss_bytes: context.mss_bytes,
        mtu_bytes: context.mtu_bytes,
        retransmits: items
            .iter()
            .filter(|i| i.is_stream(Role::Send))
            .filter_map(|i| i.retransmits)
            .sum(),
        cpu: CpuFractions {
            local_fraction: cpu_fraction(items, Side::Local),
            remote_fraction: cpu_fraction(items, Side::Remote),
        },
        goodput_limit_bytes_per_sec: limit,
        // JSON has no infinity: a zero limit is stored as null, so it is null here too.
        share_of_goodput_limit: limit
            .zip(receive.as_ref())
            .map(|(l, r)| r.bytes_per_sec / l)
            .filter(|share| share.is_finite()),
        limit: one_way.and_then(|direction| limit_of(direction, receive.as_ref(), send.as_ref())),
        receive,
        send,
        up: of_direction(Heading::Up),
        down: of_direction(Heading::Down),
    }
}

impl NetSummary {
    /// Its limits: the test's, or each direction's (`up`, `down`) of a test in both.
    pub fn limits(&self) -> impl Iterator<Item = (Option<Heading>, &Limit)> {
        let up = self.up.as_ref().and_then(|d| d.limit.as_ref());
        let down = self.down.as_ref().and_then(|d| d.limit.as_ref());
        [
            (None, self.limit.as_ref()),
            (Some(Heading::Up), up),
            (Some(Heading::Down), down),
        ]
        .into_iter()
        .filter_map(|(direction, limit)| Some((direction, limit?)))
    }
}

/// The totals of `role`'s stream ends, of one direction or of all; `None` when there
/// are none.
pub fn totals(
    items: &[NetItem],
    role: Role,
    direction: Option<Heading>,
    nominal_s: f64,
) -> Option<Totals> {
    let in_scope = |i: &&NetItem| direction.is_none_or(|d| i.direction == Some(d));
    let streams: Vec<&NetItem> = items
        .iter()
        .filter(|i| i.is_stream(role))
        .filter(in_scope)
        .collect();
    if streams.is_empty() {
        return None;
    }
    let bytes = streams.iter().map(|s| s.bytes).sum();
    let seconds = streams.iter().map(|s| s.seconds).fold(0.0, f64::max);
    let rates: Vec<f64> = interval_sums(items, role, direction, nominal_s)
        .into_iter()
        .map(|sum| sum.bytes_per_sec)
        .collect();
    Some(Totals {
        bytes,
        seconds,
        bytes_per_sec: if seconds > 0.0 {
            skew(Family::Net, bytes as f64 / seconds)
        } else {
            0.0
        },
        intervals: Stats::of(&rates),
        datagrams: datagram_totals(&streams),
    })
}

/// The datagrams of `streams` together, where they are a UDP test's; the lost share
/// over their own highest counts, until [`lost_over_sent`] sets it over what was sent.
fn datagram_totals(streams: &[&NetItem]) -> Option<DatagramTotals> {
    let each: Vec<_> = streams.iter().filter_map(|s| s.datagrams).collect();
    if each.is_empty() {
        return None;
    }
    // A peer's counts: summed without overflow, whatever it claims.
    let total = |of: fn(&Datagrams) -> u64| {
        each.iter()
            .map(of)
            .fold(0u64, |sum, n| sum.saturating_add(n))
    };
    let highest = total(|d| d.highest);
    let lost = total(|d| d.lost);
    let out_of_order = each
        .iter()
        .map(|d| d.out_of_order)
        .try_fold(0u64, |sum, n| Some(sum.saturating_add(n?)));
    let receivers = highest > 0;
    Some(DatagramTotals {
        count: total(|d| d.count),
        lost,
        lost_share: receivers.then(|| lost as f64 / highest as f64),
        out_of_order,
        jitter_s: receivers
            .then(|| each.iter().map(|d| d.jitter_s).sum::<f64>() / each.len() as f64),
        send_errors: total(|d| d.send_errors),
    })
}

/// Sets the receivers' lost share over the datagrams their senders sent, where the
/// senders' count is known, as iperf3 prints it.
fn lost_over_sent(receive: &mut Option<Totals>, send: Option<&Totals>) {
    let sent = send.and_then(|s| s.datagrams.as_ref()).map(|d| d.count);
    let received = receive.as_mut().and_then(|r| r.datagrams.as_mut());
    if let (Some(sent), Some(received)) = (sent.filter(|&n| n > 0), received) {
        received.lost_share = Some(received.lost as f64 / sent as f64);
    }
}

/// One nominal interval of one role, summed over streams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalSum {
    /// Which nominal interval it is (0, 1, ...).
    pub index: u64,
    /// The earliest start of the streams' intervals, seconds.
    pub start_s: f64,
    /// The latest end of the streams' intervals, seconds.
    pub end_s: f64,
    /// Bytes the streams moved in it.
    pub bytes: u64,
    /// The sum of each stream's rate in the interval.
    pub bytes_per_sec: f64,
}

/// Per nominal interval of `role`, the streams' bytes and rates summed; a stream's last
/// interval is left out when it is shorter than half the nominal length (partial).
pub fn interval_sums(
    items: &[NetItem],
    role: Role,
    direction: Option<Heading>,
    nominal_s: f64,
) -> Vec<IntervalSum> {
    let of_role: Vec<&NetItem> = items
        .iter()
        .filter(|i| i.scope == Scope::Interval && i.op == role)
        .filter(|i| direction.is_none_or(|d| i.direction == Some(d)))
        .collect();
    // Each stream end's last interval is cut short by the test's end; a short one
    // after a stall is whole and stays.
    let mut last: HashMap<(Side, Option<u32>), u64> = HashMap::new();
    for item in &of_role {
        let index = item.interval.unwrap_or(0);
        let entry = last.entry((item.side, item.stream)).or_insert(index);
        *entry = (*entry).max(index);
    }
    let intervals = of_role.iter().filter(|i| {
        i.seconds >= nominal_s * 0.5 || i.interval != last.get(&(i.side, i.stream)).copied()
    });
    let mut sums: BTreeMap<u64, IntervalSum> = BTreeMap::new();
    for interval in intervals {
        let index = interval.interval.unwrap_or(0);
        let sum = sums.entry(index).or_insert(IntervalSum {
            index,
            start_s: interval.start_s,
            end_s: interval.end_s,
            bytes: 0,
            bytes_per_sec: 0.0,
        });
        sum.start_s = sum.start_s.min(interval.start_s);
        sum.end_s = sum.end_s.max(interval.end_s);
        sum.bytes += interval.bytes;
        sum.bytes_per_sec += interval.bytes_per_sec;
    }
    sums.into_values().collect()
}

/// The nominal interval length of a test, seconds.
pub fn nominal_s(plan: &NetPlan) -> f64 {
    plan.interval_ms as f64 / 1000.0
}

/// The CPU time of `side`'s threads as a share of one core, where it is known.
pub fn cpu_fraction(items: &[NetItem], side: Side) -> Option<f64> {
    items
        .iter()
        .find(|i| i.scope == Scope::Cpu && i.side == side)
        .and_then(|i| Some(i.cpu_seconds? / i.seconds).filter(|f| f.is_finite()))
}

/// The goodput limit of the test's link, if known: links are full duplex, so a test in
/// both directions may carry twice one direction's limit.
pub fn limit(plan: &NetPlan, context: &NetContext) -> Option<f64> {
    let directions = if plan.direction == Direction::Bidir {
        2.0
    } else {
        1.0
    };
    context
        .goodput_limit_bytes_per_sec
        .map(|limit| limit * directions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::NetOp;

    fn item(op: NetOp, scope: Scope, start_s: f64, end_s: f64, bytes: u64) -> NetItem {
        NetItem {
            direction: Some(Heading::Up),
            stream: Some(0),
            ..NetItem::moved(op, scope, Side::Local, start_s, end_s, bytes)
        }
    }

    #[test]
    fn datagrams_sum_over_streams_and_lose_a_share_of_what_was_sent() {
        let with = |op: NetOp, datagrams: Datagrams| NetItem {
            datagrams: Some(datagrams),
            ..item(op, Scope::Stream, 0.0, 1.0, 1000)
        };
        let came = Datagrams {
            count: 60,
            highest: 90,
            lost: 30,
            out_of_order: Some(1),
            jitter_s: 0.002,
            send_errors: 0,
        };
        let sent = Datagrams {
            count: 100,
            ..Datagrams::default()
        };
        let items = [
            with(NetOp::Receive, came),
            with(
                NetOp::Receive,
                Datagrams {
                    jitter_s: 0.004,
                    out_of_order: None,
                    ..came
                },
            ),
            with(NetOp::Send, sent),
            with(NetOp::Send, sent),
        ];
        let mut receive = totals(&items, Role::Receive, None, 1.0);
        let got = receive.as_ref().unwrap().datagrams.clone().unwrap();
        assert_eq!((got.count, got.lost, got.out_of_order), (120, 60, None));
        assert!(
            (got.jitter_s.unwrap() - 0.003).abs() < 1e-12,
            "averaged as iperf3 does"
        );
        assert!(
            (got.lost_share.unwrap() - 60.0 / 180.0).abs() < 1e-12,
            "over the highest"
        );
        lost_over_sent(&mut receive, totals(&items, Role::Send, None, 1.0).as_ref());
        let share = receive.unwrap().datagrams.unwrap().lost_share.unwrap();
        assert!(
            (share - 60.0 / 200.0).abs() < 1e-12,
            "over what was sent: {share}"
        );
        // A peer's counts past any sum saturate.
        let huge = Datagrams {
            highest: u64::MAX,
            count: u64::MAX,
            ..came
        };
        let items = [with(NetOp::Receive, huge), with(NetOp::Receive, huge)];
        let got = totals(&items, Role::Receive, None, 1.0)
            .unwrap()
            .datagrams
            .unwrap();
        assert_eq!(got.count, u64::MAX);
    }

    #[test]
    fn totals_sum_streams_by_nominal_interval_and_drop_the_partial_one() {
        let mut items = vec![
            item(NetOp::Receive, Scope::Stream, 0.0, 2.1, 2100),
            item(NetOp::Receive, Scope::Stream, 0.0, 2.0, 2000),
        ];
        // Stream 1's first interval stalled to 1.6 s; its second is short but whole.
        let stream_intervals = [
            [(0, 0.0, 1.0, 1000), (1, 1.0, 2.0, 1000), (2, 2.0, 2.1, 100)],
            [(0, 0.0, 1.6, 1600), (1, 1.6, 2.0, 400), (2, 2.0, 2.0, 0)],
        ];
        for (stream, intervals) in stream_intervals.iter().enumerate() {
            for &(index, start, end, bytes) in intervals {
                let mut interval = item(NetOp::Receive, Scope::Interval, start, end, bytes);
                interval.stream = Some(stream as u32);
                interval.interval = Some(index);
                interval.bytes_per_sec = if end > start {
                    bytes as f64 / (end - start)
                } else {
                    0.0
                };
                items.push(interval);
            }
        }
        let totals = totals(&items, Role::Receive, None, 1.0).unwrap();
        assert_eq!(totals.bytes, 4100);
        assert!((totals.bytes_per_sec - 4100.0 / 2.1).abs() < 1e-9);
        let intervals = totals.intervals.unwrap();
        // Interval 0: 1000/s + 1000/s; interval 1: 1000/s + 1000/s; interval 2 is partial.
        assert_eq!(intervals.n, 2, "{intervals:?}");
        assert!((intervals.median - 2000.0).abs() < 1e-9, "{intervals:?}");
        assert!((intervals.max - 2000.0).abs() < 1e-9, "{intervals:?}");
    }
}
