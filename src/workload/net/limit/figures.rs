//! What the stored items of one direction of a test say about why it ran at its rate:
//! the senders' TCP account (busy, held by the window, held by the buffer), windows,
//! queues, loss and round trips over the steady intervals, and each end's stream
//! threads' time on a CPU and waiting for one.

use crate::workload::net::item::Heading;
use std::collections::HashMap;

use crate::workload::net::host::{CoreTime, HostAccount};
use crate::workload::net::item::{NetItem, Scope, Side};
use crate::workload::net::report::{Role, Stall};

/// One direction's figures over its steady intervals (the first left out where there
/// are three or more, and a last one cut short by the test's end).
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Which end sent.
    pub sender: Option<Side>,
    /// Seconds of sender intervals, over every stream.
    pub seconds: f64,
    /// Of them, TCP busy, held by the receiver's window, held by the send buffer;
    /// null where the sender's kernel does not say.
    pub busy_s: Option<f64>,
    /// See `busy_s`.
    pub rwnd_s: Option<f64>,
    /// See `busy_s`.
    pub sndbuf_s: Option<f64>,
    /// The median over intervals of the streams' peer windows over their round trips.
    pub window: Option<f64>,
    /// The peer's window, summed over streams, in the median interval.
    pub window_bytes: Option<u64>,
    /// The median over intervals of the streams' unacknowledged bytes over their round
    /// trips: what the send buffers carried per round trip.
    pub send_buffer: Option<f64>,
    /// The largest stream's send buffer (SO_SNDBUF) at the end.
    pub send_buffer_bytes: Option<u64>,
    /// The largest stream's receive buffer (SO_RCVBUF) at the receiving end, at the end.
    pub receive_buffer_bytes: Option<u64>,
    /// Whether window scaling was agreed; null where the stored run does not say.
    pub window_scaled: Option<bool>,
    /// Whether the test set its window (`-w`).
    pub window_set: bool,
    /// The median smoothed round trip, microseconds.
    pub srtt_us: Option<u64>,
    /// The least round trip seen.
    pub min_rtt_us: Option<u64>,
    /// Data segments sent and retransmitted.
    pub segments_out: u64,
    /// See `segments_out`.
    pub retransmits: u64,
    /// Retransmissions the receiver reported as duplicates (DSACK, RFC 3708): sent
    /// again though the first copy arrived (a tail-loss probe, a timeout fired early).
    pub spurious: u64,
    /// The senders' MSS.
    pub mss_bytes: Option<u64>,
    /// The senders' congestion control.
    pub congestion: Option<String>,
    /// Whether every sender left slow start.
    pub left_slow_start: Option<bool>,
    /// Whether the peer's window still grew in the last steady interval.
    pub window_growing: bool,
    /// The busiest stream thread at each end.
    pub threads: Vec<Thread>,
    /// Each end's machine, where it said.
    pub hosts: HashMap<Side, HostAccount>,
    /// A sender whose bytes stopped arriving, and its path MTU.
    pub stall: Option<(Stall, Option<u64>)>,
    /// An end that sends no account of its own (an iperf3): its process's CPU time
    /// over the test's wall time, in cores, as it reported it.
    pub peer_cpu: Option<f64>,
    /// Which end that is.
    pub peer_side: Option<Side>,
    /// The share of the senders' steady intervals that ended with the receiver's
    /// window shut (under two segments): its queue full, its reader behind.
    pub window_shut: f64,
    /// What the senders delivered and the receivers did not read by their end, summed
    /// over streams: what a receiver left in its queue.
    pub unread_bytes: u64,
}

/// A stream thread's CPU use over the steady intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    /// Its end.
    pub side: Side,
    /// `send` or `receive`.
    pub role: Role,
    /// Its stream.
    pub stream: u32,
    /// Its CPU time over the wall time.
    pub used: f64,
    /// The time it was runnable and waited for a CPU, over the wall time: a busy core,
    /// or its end's CPU quota spent.
    pub waited: f64,
    /// The time the hypervisor held its CPU while it ran there, over the wall time:
    /// its time on the CPU scaled by that CPU's steal, s / (1 - s).
    pub stolen: f64,
    /// The CPU it was on most.
    pub cpu: Option<u32>,
}

impl Thread {
    /// The share of the time it wanted a CPU: on one, waiting for one, or on one the
    /// hypervisor took.
    pub fn load(&self) -> f64 {
        (self.used + self.waited + self.stolen).min(1.0)
    }

    /// Its time on and off a CPU in words: "on a CPU 68% of the time, waiting for one
    /// 3%", and what the hypervisor took where it took 1% or more.
    pub fn time_words(&self) -> String {
        let stolen = if self.stolen >= 0.01 {
            format!(
                ", its vCPU held by the hypervisor {:.0}%",
                self.stolen * 100.0
            )
        } else {
            String::new()
        };
        format!(
            "on a CPU {:.0}% of the time, waiting for one {:.0}%{stolen}",
            self.used * 100.0,
            self.waited * 100.0
        )
    }

    /// Sets the time stolen from it on its CPU, `core`: the hypervisor took the vCPU a
    /// share p = steal / (busy + steal) of the time it wanted to run, and a thread that
    /// ran a share `used` of the time would have run `used / (1 - p)`.
    fn steal(&mut self, core: &CoreTime) {
        let wanted = core.process + core.softirq + core.steal;
        let s = if wanted > 0.0 {
            (core.steal / wanted).clamp(0.0, 0.9)
        } else {
            0.0
        };
        let room = (1.0 - self.used - self.waited).max(0.0);
        self.stolen = (self.used * s / (1.0 - s)).min(room).max(0.0);
    }
}

/// The intervals of one stream end to keep: its whole ones (at least half the nominal
/// length), less the first where there are three or more; all of them where none is
/// whole.
fn steady<'a>(intervals: &[&'a NetItem], nominal_s: f64) -> Vec<&'a NetItem> {
    let whole: Vec<&NetItem> = intervals
        .iter()
        .copied()
        .filter(|i| i.seconds >= nominal_s * 0.5)
        .collect();
    if whole.len() >= 3 {
        whole[1..].to_vec()
    } else if whole.is_empty() {
        intervals.to_vec()
    } else {
        whole
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    (!values.is_empty()).then(|| values[values.len() / 2])
}

/// Sums a field of microseconds over intervals, in seconds; null where there are none
/// or any lacks it. In floating point: a peer's counters may be anything.
fn sum_us(intervals: &[&NetItem], field: fn(&NetItem) -> Option<u64>) -> Option<f64> {
    if intervals.is_empty() {
        return None;
    }
    intervals
        .iter()
        .map(|i| field(i).map(|us| us as f64 / 1e6))
        .sum()
}

/// Sums a counter over intervals, at most u64::MAX.
fn sum_count(intervals: &[&NetItem], field: fn(&NetItem) -> Option<u64>) -> u64 {
    intervals
        .iter()
        .filter_map(|i| field(i))
        .fold(0, u64::saturating_add)
}

/// The items of `scope` of the streams carrying `direction` whose end did `role`.
fn streams(items: &[NetItem], direction: Heading, scope: Scope, role: Role) -> Vec<&NetItem> {
    items
        .iter()
        .filter(|i| i.scope == scope && i.op == role)
        .filter(|i| i.direction == Some(direction))
        .collect()
}

/// The senders' steady intervals, every stream's together and by interval index.
struct Steady<'a> {
    /// Every stream's steady intervals.
    kept: Vec<&'a NetItem>,
    /// Per interval index, each stream's figures, for sums over streams.
    by_index: HashMap<u64, Vec<&'a NetItem>>,
    /// Whether any stream's peer window still grew in its last steady interval.
    growing: bool,
}

impl<'a> Steady<'a> {
    /// The steady intervals of each of `senders`, out of `sender_intervals`.
    fn of(senders: &[&'a NetItem], sender_intervals: &[&'a NetItem], nominal_s: f64) -> Self {
        let mut found = Steady {
            kept: Vec::new(),
            by_index: HashMap::new(),
            growing: false,
        };
        for sender in senders {
            let intervals: Vec<&NetItem> = sender_intervals
                .iter()
                .copied()
                .filter(|i| i.side == sender.side && i.stream == sender.stream)
                .collect();
            let intervals = steady(&intervals, nominal_s);
            for interval in &intervals {
                found
                    .by_index
                    .entry(interval.interval.unwrap_or(0))
                    .or_default()
                    .push(interval);
            }
            found.growing |= growing(&intervals);
            found.kept.extend(intervals);
        }
        found
    }

    /// The median over interval indexes of `bytes` over the round trip, summed over
    /// streams, and the bytes summed in that median interval.
    fn per_rtt(&self, bytes: fn(&NetItem) -> Option<u64>) -> Option<(f64, Option<u64>)> {
        let sums: Vec<(f64, u64)> = self
            .by_index
            .values()
            .filter_map(|streams| {
                streams.iter().try_fold((0.0, 0), |(rate, total), i| {
                    let (bytes, rtt) = (bytes(i)?, i.rtt_us.filter(|&r| r > 0)?);
                    Some((
                        rate + bytes as f64 / (rtt as f64 / 1e6),
                        u64::saturating_add(total, bytes),
                    ))
                })
            })
            .collect();
        let middle = median(sums.iter().map(|s| s.0).collect())?;
        let bytes = sums.iter().find(|s| s.0 == middle).map(|s| s.1);
        Some((middle, bytes))
    }
}

impl Figures {
    /// The figures of the streams carrying `direction` (`up`, `down`) in `items`.
    pub fn of(items: &[NetItem], direction: Heading, nominal_s: f64) -> Figures {
        let senders = streams(items, direction, Scope::Stream, Role::Send);
        let receivers = streams(items, direction, Scope::Stream, Role::Receive);
        let sender_intervals = streams(items, direction, Scope::Interval, Role::Send);
        let mut figures = Figures {
            sender: senders.first().map(|s| s.side),
            hosts: items
                .iter()
                .filter(|i| i.scope == Scope::Cpu)
                .filter_map(|i| Some((i.side, i.host.clone()?)))
                .collect(),
            ..Figures::default()
        };
        let steady = Steady::of(&senders, &sender_intervals, nominal_s);
        figures.window_growing = steady.growing;
        figures.add_intervals(&steady);
        figures.add_senders(&senders);
        figures.receive_buffer_bytes = receivers
            .iter()
            .filter_map(|s| s.receive_buffer_bytes)
            .max();
        figures.threads = threads(items, direction, nominal_s, &figures.hosts);
        (figures.peer_side, figures.peer_cpu) = peer(items);
        figures.window_shut = shut_share(&steady.kept, figures.mss_bytes);
        figures.unread_bytes = unread(&senders, &receivers);
        figures
    }

    /// Sets what the senders' steady intervals say: the TCP account, counters, windows
    /// and buffers per round trip, and the median round trip.
    fn add_intervals(&mut self, steady: &Steady<'_>) {
        let kept = &steady.kept;
        self.seconds = kept.iter().map(|i| i.seconds).sum();
        self.busy_s = sum_us(kept, |i| i.busy_us);
        self.rwnd_s = sum_us(kept, |i| i.rwnd_limited_us);
        self.sndbuf_s = sum_us(kept, |i| i.sndbuf_limited_us);
        self.segments_out = sum_count(kept, |i| i.segments_out);
        self.retransmits = sum_count(kept, |i| i.retransmits);
        self.spurious = sum_count(kept, |i| i.dsack_dups);
        if let Some((rate, bytes)) = steady.per_rtt(|i| i.snd_wnd_bytes) {
            (self.window, self.window_bytes) = (Some(rate), bytes);
        }
        self.send_buffer = steady.per_rtt(|i| i.send_queue_bytes).map(|(rate, _)| rate);
        self.srtt_us = median(
            kept.iter()
                .filter_map(|i| i.rtt_us)
                .map(|r| r as f64)
                .collect(),
        )
        .map(|r| r as u64);
    }

    /// Sets what the sending streams' totals say: round trip, MSS, congestion control,
    /// slow start, buffers, window scaling and any stall.
    fn add_senders(&mut self, senders: &[&NetItem]) {
        self.min_rtt_us = senders.iter().filter_map(|s| s.min_rtt_us).min();
        self.mss_bytes = senders.iter().find_map(|s| s.mss_bytes);
        self.congestion = senders.iter().find_map(|s| s.congestion.clone());
        self.left_slow_start = senders
            .iter()
            .map(|s| s.left_slow_start)
            .collect::<Option<Vec<bool>>>()
            .map(|all| all.iter().all(|&l| l));
        self.send_buffer_bytes = senders.iter().filter_map(|s| s.send_buffer_bytes).max();
        self.window_scaled = senders
            .first()
            .filter(|s| s.left_slow_start.is_some())
            .map(|s| s.send_wscale.is_some());
        self.stall = senders.iter().find_map(|s| Some((s.stalled?, s.mtu_bytes)));
    }

    /// A share of the sender's time, where its kernel said.
    pub fn share(&self, seconds: Option<f64>) -> Option<f64> {
        seconds
            .filter(|_| self.seconds > 0.0)
            .map(|s| (s / self.seconds).min(1.0))
    }

    /// Whether the receiver's buffer could still grow: below its end's autotuning
    /// maximum, with no window set by hand.
    pub fn window_room(&self) -> bool {
        let receiver = self.sender.unwrap_or(Side::Remote).other();
        let max = self
            .hosts
            .get(&receiver)
            .and_then(|h| h.buffers.tcp_rmem_max);
        !self.window_set
            && max
                .zip(self.receive_buffer_bytes)
                .is_some_and(|(max, now)| (now as f64) < 0.9 * max as f64)
    }

    /// Whether the sender's buffer could still grow: below its end's autotuning maximum,
    /// with no window set by hand; null where the sender's end did not say.
    pub fn send_buffer_room(&self) -> Option<bool> {
        if self.window_set {
            return Some(false);
        }
        let max = self.hosts.get(&self.sender?)?.buffers.tcp_wmem_max?;
        Some((self.send_buffer_bytes? as f64) < 0.9 * max as f64)
    }

    /// Whether a queue stood on the path: round trips longer than 1.5 times the least
    /// seen, and 1 ms.
    pub fn queue_stood(&self) -> bool {
        self.srtt_us
            .zip(self.min_rtt_us)
            .is_some_and(|(srtt, min)| srtt as f64 > 1.5 * min as f64 + 1000.0)
    }

    /// Segments lost over data segments sent: those retransmitted, less those the
    /// receiver said it had already (a probe or an early timeout loses nothing, and
    /// counted as lost it would put the loss ceiling below the rate carried).
    pub fn loss(&self) -> Option<f64> {
        let lost = self.retransmits.saturating_sub(self.spurious);
        (self.segments_out > 0).then(|| lost as f64 / self.segments_out as f64)
    }
}

/// The end that sends no account of its own (an iperf3), and its process's CPU time
/// over the test's wall time as it reported it.
fn peer(items: &[NetItem]) -> (Option<Side>, Option<f64>) {
    let Some(cpu) = items
        .iter()
        .find(|i| i.scope == Scope::Cpu && i.host.is_none())
    else {
        return (None, None);
    };
    let cores = cpu
        .cpu_seconds
        .map(|used| used / cpu.seconds)
        .filter(|c| c.is_finite() && cpu.seconds > 0.0);
    (Some(cpu.side), cores)
}

/// What `senders` counted as delivered and their receivers did not read, summed.
fn unread(senders: &[&NetItem], receivers: &[&NetItem]) -> u64 {
    senders
        .iter()
        .filter_map(|sender| {
            let receiver = receivers
                .iter()
                .find(|r| r.stream == sender.stream && r.side != sender.side)?;
            Some(sender.bytes.saturating_sub(receiver.bytes))
        })
        .fold(0, u64::saturating_add)
}

/// The share of `intervals` that ended with the peer's window under two segments.
fn shut_share(intervals: &[&NetItem], mss: Option<u64>) -> f64 {
    let segment = mss.unwrap_or(1448).max(536);
    let known: Vec<bool> = intervals
        .iter()
        .filter_map(|i| Some(i.snd_wnd_bytes? < 2 * segment))
        .collect();
    if known.is_empty() {
        return 0.0;
    }
    known.iter().filter(|&&shut| shut).count() as f64 / known.len() as f64
}

/// Whether a stream's peer window grew by more than a tenth in its last interval.
fn growing(intervals: &[&NetItem]) -> bool {
    let windows: Vec<u64> = intervals.iter().filter_map(|i| i.snd_wnd_bytes).collect();
    windows
        .windows(2)
        .last()
        .is_some_and(|w| w[1] as f64 > w[0] as f64 * 1.1)
}

/// Per end, its stream thread of `direction` that wanted its CPU most, with what its
/// end's `hosts` say the hypervisor took from its CPU.
fn threads(
    items: &[NetItem],
    direction: Heading,
    nominal_s: f64,
    hosts: &HashMap<Side, HostAccount>,
) -> Vec<Thread> {
    let mut out: Vec<Thread> = Vec::new();
    for stream in items
        .iter()
        .filter(|i| i.scope == Scope::Stream && i.direction == Some(direction))
    {
        let intervals: Vec<&NetItem> = items
            .iter()
            .filter(|i| i.scope == Scope::Interval && i.side == stream.side)
            .filter(|i| i.stream == stream.stream && i.op == stream.op)
            .collect();
        let intervals = steady(&intervals, nominal_s);
        let timed: Vec<&&NetItem> = intervals
            .iter()
            .filter(|i| i.cpu_seconds.is_some())
            .collect();
        let wall: f64 = timed.iter().map(|i| i.seconds).sum();
        let (used, waited) = if timed.is_empty() {
            (stream.cpu_seconds.map(|cpu| cpu / stream.seconds), 0.0)
        } else {
            let sum =
                |f: fn(&NetItem) -> Option<f64>| timed.iter().filter_map(|i| f(i)).sum::<f64>();
            (
                Some(sum(|i| i.cpu_seconds) / wall),
                sum(|i| i.cpu_wait_seconds) / wall,
            )
        };
        let Some(used) = used.filter(|u| u.is_finite()) else {
            continue;
        };
        let mut seen: HashMap<u32, usize> = HashMap::new();
        for cpu in intervals.iter().filter_map(|i| i.cpu) {
            *seen.entry(cpu).or_default() += 1;
        }
        let mut thread = Thread {
            side: stream.side,
            role: if stream.op == Role::Send {
                Role::Send
            } else {
                Role::Receive
            },
            stream: stream.stream.unwrap_or(0),
            used: used.clamp(0.0, 1.0),
            // A thread held by a quota waits the rest of each period; the two add up
            // to the wall time at most.
            waited: if waited.is_finite() {
                waited.clamp(0.0, 1.0 - used.clamp(0.0, 1.0))
            } else {
                0.0
            },
            stolen: 0.0,
            cpu: seen
                .into_iter()
                .max_by_key(|&(cpu, n)| (n, cpu))
                .map(|(cpu, _)| cpu),
        };
        let core = thread.cpu.and_then(|cpu| {
            let host = hosts.get(&thread.side)?;
            host.cores.iter().find(|c| c.cpu == cpu)
        });
        if let Some(core) = core {
            thread.steal(core);
        }
        match out.iter_mut().find(|t| t.side == thread.side) {
            Some(busiest) if busiest.load() < thread.load() => *busiest = thread,
            Some(_) => {}
            None => out.push(thread),
        }
    }
    out
}
