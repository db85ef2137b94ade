//! Why a net test ran at its rate: every ceiling its figures give (the wire, the
//! receiver's window, the send buffer, loss, CPU) and the cause that binds, named from
//! the senders' own TCP account, with what to change.

mod advice;
mod figures;

use crate::workload::net::item::Heading;
use serde::{Deserialize, Serialize};

use super::context::NetContext;
use super::item::{NetItem, Side};
use super::report::Role;
pub use figures::{Figures, Thread};

/// What holds a test's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The link or a queue on the way.
    Path,
    /// The receiver's window.
    ReceiveWindow,
    /// The sender's send buffer.
    SendBuffer,
    /// Loss, for a congestion control that backs off at each.
    Loss,
    /// The sending thread's CPU.
    SenderCpu,
    /// The receiving thread's CPU, or its end's CPU quota.
    ReceiverCpu,
    /// Packets of the path MTU that never arrive.
    MtuBlackHole,
    /// A test too short to leave slow start.
    SlowStart,
    /// A sender with nothing to send.
    SenderApp,
    /// An iperf3 end: a sender's CPU by its own account, or a receiver that read
    /// slower than this end sent.
    Peer,
    /// A cause this version does not know, stored by a later one.
    #[serde(other)]
    Unknown,
}

impl Cause {
    /// Its name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Path => "path",
            Cause::ReceiveWindow => "receive_window",
            Cause::SendBuffer => "send_buffer",
            Cause::Loss => "loss",
            Cause::SenderCpu => "sender_cpu",
            Cause::ReceiverCpu => "receiver_cpu",
            Cause::MtuBlackHole => "mtu_black_hole",
            Cause::SlowStart => "slow_start",
            Cause::SenderApp => "sender_app",
            Cause::Peer => "peer",
            Cause::Unknown => "unknown",
        }
    }
}

/// A rate the test could not pass, and what sets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// `wire`, `window`, `send_buffer`, `loss` or `cpu`.
    pub name: String,
    /// The rate, bytes per second.
    pub bytes_per_sec: f64,
    /// What sets it, in words.
    pub set_by: String,
}

/// Why a test's rate is what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// The cause that binds; null where the figures cannot tell.
    pub cause: Option<Cause>,
    /// Where it is (an end, a CPU, the path).
    #[serde(rename = "where")]
    pub at: String,
    /// The share of the test the cause held the sender, where it is a share of time.
    pub share: Option<f64>,
    /// The figures that show it.
    pub evidence: String,
    /// Every ceiling the figures give.
    pub ceilings: Vec<Ceiling>,
    /// What to change, and to what.
    pub advice: Option<String>,
}

/// A share of the sender's time above which what held it may be the cause.
const HELD: f64 = 0.1;
/// A rate within this share of a ceiling has reached it.
const REACHED: f64 = 0.75;
/// A thread using this much of what it may is the limit.
const CPU_BOUND: f64 = 0.9;
/// The share of a test's periods in which an end's CPU quota ran out from which its
/// busiest thread binds as its CPU.
const QUOTA_SPENT: f64 = 0.5;
/// A sender idle this share of its time had nothing to send.
const IDLE: f64 = 0.3;

/// The limit of the streams carrying `direction` at `rate` (their received bytes per
/// second), over the path `context`; `None` where no stream sent that way.
pub fn limit_of(
    items: &[NetItem],
    direction: Heading,
    rate: f64,
    nominal_s: f64,
    context: &NetContext,
    wire: Option<f64>,
    window_set: bool,
) -> Option<Limit> {
    // Runs stored before ratelab kept a thread's CPU per interval have no limit: their
    // summaries conclude again as they were stored.
    if !items
        .iter()
        .any(|i| i.cpu_seconds.is_some() && i.interval.is_some())
    {
        return None;
    }
    let mut figures = Figures::of(items, direction, nominal_s);
    figures.window_set = window_set;
    let ceilings = ceilings(&figures, rate, wire);
    if figures.sender.is_none() && figures.threads.is_empty() {
        return None;
    }
    let (cause, share) = cause(&figures, rate, &ceilings);
    let words = advice::words(cause, &figures, rate, &ceilings, context, wire);
    Some(Limit {
        cause,
        at: words.at,
        share,
        evidence: words.evidence,
        ceilings,
        advice: words.advice,
    })
}

/// Each ceiling the figures give.
fn ceilings(figures: &Figures, rate: f64, wire: Option<f64>) -> Vec<Ceiling> {
    let mut out = Vec::new();
    let mut push = |name: &str, bytes_per_sec: Option<f64>, set_by: String| {
        if let Some(bytes_per_sec) = bytes_per_sec.filter(|r| r.is_finite() && *r > 0.0) {
            out.push(Ceiling {
                name: name.into(),
                bytes_per_sec,
                set_by,
            });
        }
    };
    push("wire", wire, "the link's speed and MTU".into());
    let rtt = advice::ms;
    push(
        "window",
        figures.window,
        format!(
            "the receiver's window, {} bytes, over a {} round trip",
            figures.window_bytes.unwrap_or(0),
            rtt(figures.srtt_us)
        ),
    );
    push(
        "send_buffer",
        figures.send_buffer,
        "what the send buffer held unacknowledged, over the round trip".into(),
    );
    if loss_based(figures.congestion.as_deref()) {
        // Mathis et al.: MSS / RTT x 1.22 / sqrt(p), for a control that halves at a loss.
        let loss = figures.loss().filter(|&p| p > 0.0);
        let ceiling = loss
            .zip(figures.mss_bytes)
            .zip(figures.srtt_us)
            .map(|((p, mss), rtt)| mss as f64 / (rtt as f64 / 1e6) * 1.22 / p.sqrt());
        push(
            "loss",
            ceiling,
            format!(
                "{:.2}% of segments lost, {} at a {} round trip",
                loss.unwrap_or(0.0) * 100.0,
                figures.congestion.as_deref().unwrap_or("?"),
                rtt(figures.srtt_us)
            ),
        );
    }
    if let Some(thread) = busiest(&figures.threads) {
        push(
            "cpu",
            (thread.load() > 0.0).then(|| rate / thread.load()),
            format!(
                "the {} end's {} thread, {}",
                thread.side.as_str(),
                thread.role.as_str(),
                thread.time_words()
            ),
        );
    }
    out
}

/// Whether a congestion control backs off at each loss (Mathis's model holds).
fn loss_based(congestion: Option<&str>) -> bool {
    congestion.is_some_and(|c| !c.starts_with("bbr"))
}

/// The thread nearest its CPU's limit.
fn busiest(threads: &[Thread]) -> Option<&Thread> {
    threads.iter().max_by(|a, b| a.load().total_cmp(&b.load()))
}

fn ceiling(ceilings: &[Ceiling], name: &str) -> Option<f64> {
    ceilings
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.bytes_per_sec)
}

/// A cause found, and the share of the test it held the sender.
type Finding = (Option<Cause>, Option<f64>);

/// Whether `rate` has reached the ceiling called `name`.
fn reached(ceilings: &[Ceiling], name: &str, rate: f64) -> bool {
    ceiling(ceilings, name).is_some_and(|c| rate >= REACHED * c)
}

/// The cause that binds, and the share of the test it held the sender.
fn cause(figures: &Figures, rate: f64, ceilings: &[Ceiling]) -> Finding {
    if let Some(found) = stalled(figures).or_else(|| cpu_bound(figures)) {
        return found;
    }
    // No sender intervals (an iperf3 sender sends none): its own CPU, where it used a
    // core and the wire was not full; else, and on a kernel that does not keep the
    // busy time, the ceilings alone.
    if figures.seconds <= 0.0 {
        return peer_cpu(figures, rate, ceilings);
    }
    if figures.busy_s.is_none() {
        return (None, None);
    }
    held(figures, rate, ceilings)
}

/// A sender whose bytes stopped arriving: full segments lost where a handshake's
/// small ones crossed, or a path that carried nothing at all.
fn stalled(figures: &Figures) -> Option<Finding> {
    let (stall, _) = figures.stall?;
    let cause = if stall.handshake_crossed {
        Cause::MtuBlackHole
    } else {
        Cause::Path
    };
    Some((Some(cause), None))
}

/// A thread held by its CPU, as the end it ran on.
fn cpu_bound(figures: &Figures) -> Option<Finding> {
    // A thread that wanted its CPU nearly all the time; or one whose end's CPU quota
    // ran out in most of the test's periods, which leaves it asleep between them as
    // well as waiting (a receiver held to 2%: on a CPU 2%, waiting 77%, asleep while
    // its sender answered the window it opened).
    let quota_spent = |t: &&Thread| {
        figures
            .hosts
            .get(&t.side)
            .and_then(|h| h.quota)
            .is_some_and(|q| q.cores < 1.0 && q.throttled_periods_share >= QUOTA_SPENT)
    };
    let thread = busiest(&figures.threads)
        .filter(|t| t.load() >= CPU_BOUND)
        .or_else(|| {
            figures
                .threads
                .iter()
                .filter(quota_spent)
                .max_by(|a, b| a.used.total_cmp(&b.used))
        })?;
    let cause = match thread.role {
        Role::Send => Cause::SenderCpu,
        Role::Receive => Cause::ReceiverCpu,
    };
    Some((Some(cause), Some(thread.load())))
}

/// A sender with no intervals of its own: its peer's CPU, where that end sent, used a
/// core and did not fill the wire.
fn peer_cpu(figures: &Figures, rate: f64, ceilings: &[Ceiling]) -> Finding {
    match figures
        .peer_cpu
        .filter(|_| figures.peer_side == figures.sender)
    {
        Some(cores) if cores >= CPU_BOUND && !reached(ceilings, "wire", rate) => {
            (Some(Cause::Peer), Some(cores.min(1.0)))
        }
        _ => (None, None),
    }
}

/// The cause among what held the sender's time: the window, the send buffer, nothing
/// to send, loss, slow start, or else the path.
fn held(figures: &Figures, rate: f64, ceilings: &[Ceiling]) -> Finding {
    let rwnd = figures.share(figures.rwnd_s).unwrap_or(0.0);
    let sndbuf = figures.share(figures.sndbuf_s).unwrap_or(0.0);
    let busy = figures.share(figures.busy_s).unwrap_or(0.0);
    if rwnd >= HELD
        && rwnd >= sndbuf
        && let Some(found) = window_held(figures, rate, ceilings, rwnd)
    {
        return found;
    }
    if sndbuf >= HELD
        && let Some(found) = send_buffer_held(figures, rate, ceilings, sndbuf)
    {
        return found;
    }
    if busy < 1.0 - IDLE {
        return (Some(Cause::SenderApp), Some(1.0 - busy));
    }
    if !figures.queue_stood() && ceiling(ceilings, "loss").is_some_and(|c| rate <= 2.0 * c) {
        return (Some(Cause::Loss), figures.loss());
    }
    if figures.left_slow_start == Some(false) || still_opening(figures, rate, ceilings) {
        return (Some(Cause::SlowStart), None);
    }
    (Some(Cause::Path), Some(busy))
}

/// What a receiver's window that held the sender `rwnd` of the test says: a reader
/// behind, autotuning still at work, or the window itself; `None` where it says none.
fn window_held(figures: &Figures, rate: f64, ceilings: &[Ceiling], rwnd: f64) -> Option<Finding> {
    // A window shut when sampled, or one whose ceiling does not give the rate (far
    // above it, or below it: the sampled window is not the one that held the
    // sender), that still held the sender: the receiver's queue full and its reader
    // behind, not its buffer too small. An iperf3 receiver says only its process's
    // CPU time: the peer.
    let explains =
        ceiling(ceilings, "window").is_some_and(|c| rate >= REACHED * c && rate <= c / REACHED);
    // Left unread at the end: more than four of the windows it advertised. A small
    // buffer read promptly holds about two windows' worth (the rest of its space
    // is overhead); a full one whose reader fell behind holds far more.
    let queued = figures
        .window_bytes
        .is_some_and(|w| figures.unread_bytes > w.saturating_mul(4));
    let peer_receives = figures.peer_side == figures.sender.map(Side::other);
    // A reader seen behind (its window shut, or its queue left full) held the
    // sender, however the window grew meanwhile.
    if (figures.window_shut >= 0.5 || queued) && peer_receives {
        return Some((Some(Cause::Peer), Some(rwnd)));
    }
    // A window or buffer that held the sender while it could still grow is TCP's
    // autotuning at work, not a limit: the test ended too soon.
    if (figures.window_growing && !figures.window_set) || figures.window_room() {
        return Some((Some(Cause::SlowStart), Some(rwnd)));
    }
    if !explains && peer_receives {
        return Some((Some(Cause::Peer), Some(rwnd)));
    }
    if reached(ceilings, "window", rate) {
        return Some((Some(Cause::ReceiveWindow), Some(rwnd)));
    }
    None
}

/// What a send buffer that held the sender `sndbuf` of the test says: room still to
/// grow, or the buffer itself; `None` where it says neither.
fn send_buffer_held(
    figures: &Figures,
    rate: f64,
    ceilings: &[Ceiling],
    sndbuf: f64,
) -> Option<Finding> {
    match figures.send_buffer_room() {
        Some(true) => Some((Some(Cause::SlowStart), Some(sndbuf))),
        Some(false) => Some((Some(Cause::SendBuffer), Some(sndbuf))),
        None if reached(ceilings, "send_buffer", rate) => {
            Some((Some(Cause::SendBuffer), Some(sndbuf)))
        }
        None => None,
    }
}

/// Whether a loss-based control's window alone held the sender while it still grew: a
/// known wire under three quarters full, no queue standing and nothing lost, so nothing
/// had yet told TCP to stop growing (cubic's HyStart leaves slow start early, at the
/// first rise of the round trip, and the window grows by the round trip after).
fn still_opening(figures: &Figures, rate: f64, ceilings: &[Ceiling]) -> bool {
    loss_based(figures.congestion.as_deref())
        && figures.retransmits == 0
        && !figures.queue_stood()
        && ceiling(ceilings, "wire").is_some_and(|wire| rate < REACHED * wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::host::{BufferLimits, CoreTime, HostAccount, QuotaTime};
    use crate::workload::net::item::{NetOp, Scope, Side};

    /// One sender and one receiver stream over three 1 s intervals, each interval's
    /// sender figures from `sender`, the receiver thread `receiver_used` of a core.
    fn test(sender: impl Fn(&mut NetItem), receiver_used: f64, rmem: (u64, u64)) -> Vec<NetItem> {
        let mut items = Vec::new();
        for (side, op) in [(Side::Local, NetOp::Send), (Side::Remote, NetOp::Receive)] {
            let mut stream = NetItem::moved(op, Scope::Stream, side, 0.0, 3.0, 3_000_000);
            stream.direction = Some(Heading::Up);
            stream.stream = Some(0);
            stream.mss_bytes = Some(1448);
            stream.congestion = Some("cubic".into());
            stream.left_slow_start = Some(true);
            stream.send_wscale = Some(7);
            stream.receive_buffer_bytes = Some(rmem.0);
            stream.min_rtt_us = Some(20_000);
            items.push(stream);
            for index in 0..3 {
                let start = index as f64;
                let mut interval =
                    NetItem::moved(op, Scope::Interval, side, start, start + 1.0, 1_000_000);
                interval.direction = Some(Heading::Up);
                interval.stream = Some(0);
                interval.interval = Some(index);
                interval.cpu = Some(1);
                if op == NetOp::Send {
                    interval.cpu_seconds = Some(0.01);
                    interval.cpu_wait_seconds = Some(0.0);
                    interval.busy_us = Some(1_000_000);
                    interval.rwnd_limited_us = Some(0);
                    interval.sndbuf_limited_us = Some(0);
                    interval.rtt_us = Some(20_000);
                    interval.snd_wnd_bytes = Some(4_000_000);
                    interval.send_queue_bytes = Some(4_000_000);
                    interval.segments_out = Some(700);
                    interval.retransmits = Some(0);
                    sender(&mut interval);
                } else {
                    interval.cpu_seconds = Some(receiver_used);
                    interval.cpu_wait_seconds = Some(0.0);
                }
                items.push(interval);
            }
        }
        for side in [Side::Local, Side::Remote] {
            let mut cpu = NetItem::moved(NetOp::Cpu, Scope::Cpu, side, 0.0, 3.0, 0);
            cpu.host = Some(HostAccount {
                cores: Vec::new(),
                quota: None,
                buffers: BufferLimits {
                    tcp_rmem_max: Some(rmem.1),
                    ..BufferLimits::default()
                },
            });
            items.push(cpu);
        }
        items
    }

    fn cause_of(items: &[NetItem], rate: f64) -> Option<Cause> {
        limit_of(
            items,
            Heading::Up,
            rate,
            1.0,
            &NetContext::default(),
            None,
            false,
        )
        .expect("a limit")
        .cause
    }

    #[test]
    fn a_window_at_its_maximum_binds_and_one_still_growing_is_slow_start() {
        let held = |i: &mut NetItem| {
            i.rwnd_limited_us = Some(400_000);
            i.snd_wnd_bytes = Some(40_000);
        };
        // 40 kB over 20 ms: 2 MB/s, the rate.
        let at_max = test(held, 0.01, (65_536, 65_536));
        assert_eq!(cause_of(&at_max, 1.9e6), Some(Cause::ReceiveWindow));
        let limit = limit_of(
            &at_max,
            Heading::Up,
            1.9e6,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        let limit = limit.unwrap();
        assert!((limit.share.unwrap() - 0.4).abs() < 1e-9, "{limit:?}");
        assert!(limit.advice.unwrap().contains("net.ipv4.tcp_rmem"));
        let growing = test(held, 0.01, (200_000, 6_291_456));
        assert_eq!(cause_of(&growing, 1.9e6), Some(Cause::SlowStart));
        // Growing too, but with more than four windows left unread at the end (iperf3
        // 3.12 in --bidir reads its receiving streams last): the reader held it.
        let mut behind = growing.clone();
        for item in &mut behind {
            if item.scope == Scope::Cpu && item.side == Side::Remote {
                item.host = None;
            }
            if item.scope == Scope::Stream && item.op == NetOp::Receive {
                item.bytes -= 200_000;
            }
        }
        assert_eq!(cause_of(&behind, 1.9e6), Some(Cause::Peer));
        // The same iperf3 reader with nothing left unread was not behind.
        for item in &mut behind {
            if item.scope == Scope::Stream && item.op == NetOp::Receive {
                item.bytes += 200_000;
            }
        }
        assert_ne!(cause_of(&behind, 1.9e6), Some(Cause::Peer));
    }

    #[test]
    fn a_window_still_growing_after_hystart_is_slow_start_not_the_path() {
        // CI's short test on a 20 ms line: cubic left slow start early with nothing lost,
        // and ran 57 MB/s, 5% of a 9.56 Gbit/s wire, with no queue and nothing held it.
        let wire = Some(1.195e9);
        let of = |items: &[NetItem]| {
            let context = NetContext::default();
            limit_of(items, Heading::Up, 5.7e7, 1.0, &context, wire, false).unwrap()
        };
        let opening = of(&test(|_| {}, 0.02, (1 << 22, 1 << 22)));
        assert_eq!(opening.cause, Some(Cause::SlowStart), "{opening:?}");
        assert!(
            opening
                .evidence
                .contains("cubic left slow start early with nothing lost")
                && opening
                    .evidence
                    .contains("5% of the 9.56 Gbit/s the wire carries"),
            "{}",
            opening.evidence
        );
        // A queue standing, a segment sent again, a control that does not grow until a
        // loss, or a wire nearly full: the path.
        let queued = test(|i| i.rtt_us = Some(60_000), 0.02, (1 << 22, 1 << 22));
        let lost = test(|i| i.retransmits = Some(1), 0.02, (1 << 22, 1 << 22));
        let mut bbr = test(|_| {}, 0.02, (1 << 22, 1 << 22));
        for item in bbr.iter_mut().filter(|i| i.scope == Scope::Stream) {
            item.congestion = Some("bbr".into());
        }
        for items in [&queued, &lost, &bbr] {
            assert_eq!(of(items).cause, Some(Cause::Path));
        }
        let context = NetContext::default();
        let full = test(|_| {}, 0.02, (1 << 22, 1 << 22));
        let full = limit_of(&full, Heading::Up, 1.0e9, 1.0, &context, wire, false).unwrap();
        assert_eq!(full.cause, Some(Cause::Path));
    }

    #[test]
    fn loss_binds_only_where_no_queue_stands_and_the_control_backs_off() {
        // 2% of segments again: 1448 B / 20 ms x 1.22 / sqrt(0.02) = 625 kB/s.
        let lossy = |i: &mut NetItem| i.retransmits = Some(14);
        assert_eq!(
            cause_of(&test(lossy, 0.01, (1 << 22, 1 << 22)), 7e5),
            Some(Cause::Loss)
        );
        let queued = |i: &mut NetItem| {
            i.retransmits = Some(14);
            i.rtt_us = Some(60_000);
        };
        assert_eq!(
            cause_of(&test(queued, 0.01, (1 << 22, 1 << 22)), 7e5),
            Some(Cause::Path)
        );
        // Carried at 2.4 times that ceiling: half the segments sent again were probes
        // the receiver already had (DSACK), so 1% were lost: 884 kB/s, and loss binds.
        let probed = |i: &mut NetItem| {
            i.retransmits = Some(14);
            i.dsack_dups = Some(7);
        };
        assert_eq!(
            cause_of(&test(lossy, 0.01, (1 << 22, 1 << 22)), 1.5e6),
            Some(Cause::Path)
        );
        assert_eq!(
            cause_of(&test(probed, 0.01, (1 << 22, 1 << 22)), 1.5e6),
            Some(Cause::Loss)
        );
    }

    /// A test whose receive thread was on a CPU 2% of the time and waited for one
    /// `waited` of it.
    fn receiver_on_a_cpu_2_percent(waited: f64) -> Vec<NetItem> {
        let mut items = test(|_| {}, 0.02, (1 << 22, 1 << 22));
        for item in items
            .iter_mut()
            .filter(|i| i.op == NetOp::Receive && i.scope == Scope::Interval)
        {
            item.cpu_wait_seconds = Some(waited);
        }
        items
    }

    #[test]
    fn a_thread_that_wanted_its_cpu_all_the_time_binds_though_it_ran_little() {
        // A receiver held by a quota: on a CPU 2% of the time, waiting for one the rest.
        let items = receiver_on_a_cpu_2_percent(0.97);
        assert_eq!(cause_of(&items, 5e7), Some(Cause::ReceiverCpu));
        let limit = limit_of(
            &items,
            Heading::Up,
            5e7,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        assert_eq!(limit.unwrap().at, "cpu 1, remote receive thread");
    }

    #[test]
    fn a_thread_whose_end_spent_its_cpu_quota_binds_though_it_also_slept() {
        // A receiver held to 2% of a CPU in 100 ms periods: on a CPU 2%, waiting 77%,
        // asleep the rest while its sender answered the window it opened; the quota ran
        // out in 90% of the periods.
        let mut items = receiver_on_a_cpu_2_percent(0.77);
        assert_ne!(cause_of(&items, 5e7), Some(Cause::ReceiverCpu));
        let quota = |share: f64| QuotaTime {
            cores: 0.02,
            throttled_periods_share: share,
            throttled_us: 2_000_000,
        };
        for (share, cause) in [(0.9, Some(Cause::ReceiverCpu)), (0.2, None)] {
            for item in items.iter_mut().filter(|i| i.scope == Scope::Cpu) {
                if let Some(host) = item.host.as_mut() {
                    host.quota = (item.side == Side::Remote).then(|| quota(share));
                }
            }
            let got = cause_of(&items, 5e7);
            match cause {
                Some(cause) => assert_eq!(got, Some(cause)),
                None => assert_ne!(got, Some(Cause::ReceiverCpu), "quota spent in {share}"),
            }
        }
    }

    #[test]
    fn a_thread_whose_vcpu_the_hypervisor_took_binds_as_its_cpu() {
        // On CI's VM: the send thread on a CPU 68% of the time, waiting 3%, on a vCPU
        // the hypervisor took 28% of the test, of the 98% it wanted to run: p = 0.286, and
        // 0.68 x 0.286 / 0.714 = 0.27 more.
        let mut items = test(
            |i| {
                i.cpu_seconds = Some(0.68);
                i.cpu_wait_seconds = Some(0.03);
            },
            0.3,
            (1 << 22, 1 << 22),
        );
        assert_eq!(cause_of(&items, 5e7), Some(Cause::Path));
        for item in items.iter_mut().filter(|i| i.scope == Scope::Cpu) {
            let host = item.host.as_mut().unwrap();
            host.cores = vec![CoreTime {
                cpu: 1,
                process: 0.7,
                softirq: 0.0,
                steal: 0.28,
            }];
        }
        assert_eq!(cause_of(&items, 5e7), Some(Cause::SenderCpu));
        let limit = limit_of(
            &items,
            Heading::Up,
            5e7,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        let limit = limit.unwrap();
        assert!(
            limit.evidence.contains("held by the hypervisor 27%"),
            "{limit:?}"
        );
    }

    #[test]
    fn a_sender_without_intervals_gives_the_ceilings_alone() {
        // An iperf3 sender sends totals only: no account of what held it.
        let mut items = test(|_| {}, 0.01, (1 << 22, 1 << 22));
        items.retain(|i| !(i.op == NetOp::Send && i.scope == Scope::Interval));
        let limit = limit_of(
            &items,
            Heading::Up,
            1e6,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        let limit = limit.unwrap();
        assert_eq!(limit.cause, None, "{limit:?}");
        assert!(limit.evidence.contains("at the peer"), "{limit:?}");
    }

    #[test]
    fn an_iperf3_sender_that_used_a_core_is_the_peer() {
        let mut items = test(|_| {}, 0.1, (1 << 22, 1 << 22));
        items.retain(|i| !(i.op == NetOp::Send && i.scope == Scope::Interval));
        let sender = |items: &mut Vec<NetItem>, cores: f64| {
            let cpu = items
                .iter_mut()
                .find(|i| i.scope == Scope::Cpu && i.side == Side::Local)
                .unwrap();
            cpu.host = None;
            cpu.cpu_seconds = Some(cores * cpu.seconds);
        };
        sender(&mut items, 0.5);
        assert_eq!(cause_of(&items, 1e6), None);
        sender(&mut items, 0.97);
        let limit = limit_of(
            &items,
            Heading::Up,
            1e6,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        let limit = limit.unwrap();
        assert_eq!(limit.cause, Some(Cause::Peer), "{limit:?}");
        assert!(limit.evidence.contains("97% of a core"), "{limit:?}");
        // Where the wire was full, the path holds it, whatever the peer used.
        let full = limit_of(
            &items,
            Heading::Up,
            1e6,
            1.0,
            &NetContext::default(),
            Some(1.1e6),
            false,
        );
        assert_eq!(full.unwrap().cause, None);
    }

    #[test]
    fn an_iperf3_receiver_whose_window_stayed_shut_is_the_peer_and_a_small_one_is_not() {
        // The window shut at each interval's end: the receiver's queue full.
        let shut = |i: &mut NetItem| {
            i.rwnd_limited_us = Some(600_000);
            i.snd_wnd_bytes = Some(0);
        };
        let mut items = test(shut, 0.1, (1 << 22, 1 << 22));
        items.retain(|i| !(i.op == NetOp::Receive && i.scope == Scope::Interval));
        for item in &mut items {
            if item.scope == Scope::Cpu && item.side == Side::Remote {
                item.host = None;
                item.cpu_seconds = Some(0.77 * item.seconds);
            }
            // The receiver read 3 kB less than the sender delivered.
            if item.scope == Scope::Stream && item.op == NetOp::Receive {
                item.bytes -= 3_000;
            }
        }
        let limit = limit_of(
            &items,
            Heading::Up,
            1e6,
            1.0,
            &NetContext::default(),
            None,
            false,
        );
        let limit = limit.unwrap();
        assert_eq!(limit.cause, Some(Cause::Peer), "{limit:?}");
        assert!(limit.at.starts_with("the receiver"), "{limit:?}");
        assert!(limit.evidence.contains("77% of a core"), "{limit:?}");
        assert!(
            limit.evidence.contains("2.93 KiB delivered but unread"),
            "{limit:?}"
        );
        // A window open at 40 kB that held the sender: its size, not its reader.
        let small = |i: &mut NetItem| {
            i.rwnd_limited_us = Some(600_000);
            i.snd_wnd_bytes = Some(40_000);
        };
        let mut items = test(small, 0.1, (65_536, 65_536));
        for item in &mut items {
            if item.scope == Scope::Cpu && item.side == Side::Remote {
                item.host = None;
            }
        }
        assert_ne!(cause_of(&items, 1.9e6), Some(Cause::Peer));
    }

    #[test]
    fn a_run_stored_before_the_account_has_no_limit() {
        let mut items = test(|_| {}, 0.01, (1 << 22, 1 << 22));
        for item in &mut items {
            item.cpu_seconds = None;
        }
        assert_eq!(
            limit_of(
                &items,
                Heading::Up,
                1e6,
                1.0,
                &NetContext::default(),
                None,
                false
            ),
            None
        );
    }
}
