//! A limit in words: where the cause is, the figures that show it, and what to change
//! with the value that would do, scaled from what the test measured.

use super::figures::Figures;
use super::{Cause, Ceiling, Thread, busiest, ceiling, still_opening};
use crate::vocab::units::{format_bits_rate, format_bytes, format_size};
use crate::workload::net::context::NetContext;
use crate::workload::net::item::Side;
use crate::workload::net::report::Stall;

/// Where, why and what to do.
pub struct Words {
    /// Where the cause is.
    pub at: String,
    /// The figures that show it.
    pub evidence: String,
    /// What to change.
    pub advice: Option<String>,
}

/// A share in whole percent.
fn pct(share: Option<f64>) -> String {
    format!("{:.0}%", share.unwrap_or(0.0) * 100.0)
}

/// Microseconds as milliseconds, `?` where unknown.
pub(super) fn ms(us: Option<u64>) -> String {
    us.map_or("?".into(), |us| format!("{:.1} ms", us as f64 / 1e3))
}

/// The end called by its role: "the receiver, the remote end".
fn end(side: Side, role: &str) -> String {
    format!("{role}, the {} end", side.as_str())
}

/// What a buffer of `now` bytes would need to be for `rate` to reach `target` (the
/// window grows with the buffer, so in proportion), up to a power of two, as a sysctl
/// takes it and as people read it: `4194304 (4 MiB)`.
fn scaled(now: u64, rate: f64, target: f64) -> String {
    let bytes = (now as f64 * target / rate.max(1.0)).ceil() as u64;
    let bytes = bytes.max(1).checked_next_power_of_two().unwrap_or(bytes);
    format!("{bytes} ({})", format_size(bytes))
}

/// The words for an iperf3 end that held the test: a sender that used its core, or a
/// receiver that read slower than this end sent.
fn peer_words(figures: &Figures, sender: Side) -> Words {
    let cpu = figures.peer_cpu.unwrap_or(0.0) * 100.0;
    if figures.peer_side == Some(sender) {
        return Words {
            at: end(sender, "the sender"),
            evidence: format!(
                "the iperf3 sender's process used {cpu:.0}% of a core (its own cpu_util), \
                 and nothing held this end's receiver"
            ),
            advice: Some(
                "larger writes (-l), or more streams (-P) with iperf3 3.16 or later, which \
                 sends each from a thread of its own"
                    .into(),
            ),
        };
    }
    let unread = if figures.unread_bytes > 0 {
        format!(
            "; it left {} delivered but unread at its end",
            format_bytes(figures.unread_bytes)
        )
    } else {
        String::new()
    };
    Words {
        at: end(sender.other(), "the receiver"),
        evidence: format!(
            "the iperf3 receiver read slower than this end sent: its window held the \
             sender {} of its time (shut at the end of {} of the intervals), its \
             process used {cpu:.0}% of a core (its own cpu_util){unread}",
            pct(figures.share(figures.rwnd_s)),
            pct(Some(figures.window_shut)),
        ),
        advice: Some(
            "a reader with a core of its own: iperf3 3.16 or later reads each stream in a \
             thread of its own, where an older one sends and reads in one thread (--bidir)"
                .into(),
        ),
    }
}

/// The words for `cause` at `rate`.
pub fn words(
    cause: Option<super::Cause>,
    figures: &Figures,
    rate: f64,
    ceilings: &[Ceiling],
    context: &NetContext,
    wire: Option<f64>,
) -> Words {
    let sender = figures.sender.unwrap_or(Side::Local);
    let receiver = sender.other();
    let carried = |name| ceiling(ceilings, name).map_or("?".into(), format_bits_rate);
    let words = match cause {
        None => unknown_words(figures, sender),
        Some(Cause::ReceiveWindow) => {
            window_words(figures, rate, receiver, carried("window"), wire)
        }
        Some(Cause::SendBuffer) => buffer_words(figures, rate, sender, wire),
        Some(Cause::Loss) => loss_words(figures, carried("loss")),
        Some(Cause::SenderCpu | Cause::ReceiverCpu) => {
            cpu_words(figures, busiest(&figures.threads))
        }
        Some(Cause::SlowStart) => Words {
            at: end(sender, "the sender"),
            evidence: opening_evidence(figures, rate, ceilings, wire),
            advice: Some("run it longer (-t 10) to see the rate it settles at".into()),
        },
        Some(Cause::SenderApp) => Words {
            at: end(sender, "the sender"),
            evidence: format!(
                "the sender had nothing in flight {} of its time",
                pct(figures.share(figures.busy_s).map(|b| 1.0 - b))
            ),
            advice: None,
        },
        Some(Cause::Path) => Words {
            at: format!(
                "the path to {}",
                context.address.as_deref().unwrap_or("the server")
            ),
            evidence: path_evidence(figures, rate, wire),
            advice: None,
        },
        Some(Cause::MtuBlackHole) if let Some((stall, mtu)) = figures.stall => {
            black_hole_words(figures, stall, mtu, context)
        }
        Some(Cause::Peer) => peer_words(figures, sender),
        Some(Cause::MtuBlackHole | Cause::Unknown) => Words {
            at: end(receiver, "the peer"),
            evidence: String::new(),
            advice: None,
        },
    };
    with_path_mtu(words, context)
}

/// `words`, saying so where the path MTU is below the interface's.
fn with_path_mtu(mut words: Words, context: &NetContext) -> Words {
    if let (Some(path), Some(nic)) = (context.mtu_bytes, context.interface.as_ref())
        && let Some(mtu) = nic.mtu_bytes.filter(|&mtu| path < mtu)
        && nic.kind != "loopback"
    {
        words.evidence.push_str(&format!(
            "; the path MTU, {path} bytes, is below {}'s {mtu}",
            nic.name
        ));
    }
    words
}

/// The words where no cause can be told: the kernel does not keep the sender's busy
/// time, or the sender is a peer that does not send its account.
fn unknown_words(figures: &Figures, sender: Side) -> Words {
    let evidence = if figures.seconds > 0.0 {
        "this kernel does not say when TCP held the sender back (TCP_INFO's busy time, \
         Linux 4.10 on): the ceilings alone"
    } else {
        "the sender's TCP account is at the peer, which does not send it: the ceilings alone"
    };
    Words {
        at: end(sender, "the sender"),
        evidence: evidence.into(),
        advice: None,
    }
}

/// Loss, for a control that backs off at each: the share lost and what it allows.
fn loss_words(figures: &Figures, carried: String) -> Words {
    Words {
        at: "the path".into(),
        evidence: format!(
            "{:.2}% of segments were sent again and lost (less those the receiver already \
             had) and {} backs off at each loss: at {} round trip that allows {carried}",
            figures.loss().unwrap_or(0.0) * 100.0,
            figures
                .congestion
                .as_deref()
                .unwrap_or("the sender's control"),
            ms(figures.srtt_us),
        ),
        advice: Some(
            "find what drops segments (ip -s link on each hop counts errors and drops), or \
             let the sender use bbr, which does not back off at every loss"
                .into(),
        ),
    }
}

/// Segments of the path MTU that never arrived while small packets did.
fn black_hole_words(
    figures: &Figures,
    stall: Stall,
    mtu: Option<u64>,
    context: &NetContext,
) -> Words {
    let mtu = mtu.map_or(String::new(), |mtu| format!(" (path MTU {mtu})"));
    Words {
        at: format!(
            "the path to {}",
            context.address.as_deref().unwrap_or("the server")
        ),
        evidence: format!(
            "segments of {} bytes{mtu} went unacknowledged for {:.1} s ({} held) while the \
             retransmission timer fired {} times in a row, and a new connection's handshake, \
             in small packets, crossed: a hop on the way takes less than the ends' MTU and \
             says nothing",
            figures.mss_bytes.map_or("?".into(), |m| m.to_string()),
            stall.seconds,
            format_bytes(stall.unacknowledged_bytes),
            stall.timeouts
        ),
        advice: Some(
            "give every end the MTU of the smallest hop (ip link set DEV mtu 1500), or \
             let TCP find it (sysctl net.ipv4.tcp_mtu_probing=1); -M 1448 tests with \
             segments that fit 1500"
                .into(),
        ),
    }
}

/// A queue standing on the path, and the rate against the wire.
fn path_evidence(figures: &Figures, rate: f64, wire: Option<f64>) -> String {
    if let Some((stall, _)) = figures.stall {
        return format!(
            "nothing was acknowledged for {:.1} s ({} held) while the retransmission \
             timer fired {} times in a row, and a new connection's handshake did not cross \
             either: the path carried nothing",
            stall.seconds,
            format_bytes(stall.unacknowledged_bytes),
            stall.timeouts
        );
    }
    let mut text = format!(
        "the sender was busy {} of its time and nothing held it",
        pct(figures.share(figures.busy_s))
    );
    if let (Some(srtt), Some(min)) = (figures.srtt_us, figures.min_rtt_us)
        && figures.queue_stood()
    {
        text.push_str(&format!(
            "; a queue stood on the path: round trips of {} against {} at least",
            ms(Some(srtt)),
            ms(Some(min))
        ));
    }
    text.push_str(&wire_share(rate, wire));
    text
}

/// `; 5% of the 9.56 Gbit/s the wire carries`, where the wire is known.
fn wire_share(rate: f64, wire: Option<f64>) -> String {
    wire.map_or(String::new(), |wire| {
        format!(
            "; {:.0}% of the {} the wire carries",
            rate / wire * 100.0,
            format_bits_rate(wire)
        )
    })
}

/// Why the test ended with TCP's window still opening: where the sender left slow
/// start, that nothing since had told it to stop growing.
fn opening_evidence(
    figures: &Figures,
    rate: f64,
    ceilings: &[Ceiling],
    wire: Option<f64>,
) -> String {
    let mut text = String::from("the test ended while TCP was still opening its window");
    // Only where the rule that named it was the window's own growth after slow start,
    // not a receive window or send buffer still growing.
    if figures.left_slow_start == Some(true) && still_opening(figures, rate, ceilings) {
        text.push_str(&format!(
            ": {} left slow start early with nothing lost (at a first rise of the round \
             trip) and its window grew by the round trip after, with no queue standing \
             (round trips of {} against {} at least) and no segment sent again",
            figures.congestion.as_deref().unwrap_or("TCP"),
            ms(figures.srtt_us),
            ms(figures.min_rtt_us)
        ));
        text.push_str(&wire_share(rate, wire));
    }
    text
}

/// A thread's CPU, or its end's quota.
fn cpu_words(figures: &Figures, thread: Option<&Thread>) -> Words {
    let Some(thread) = thread else {
        return Words {
            at: String::new(),
            evidence: String::new(),
            advice: None,
        };
    };
    let host = figures.hosts.get(&thread.side);
    let softirq = thread.cpu.and_then(|cpu| {
        let core = host?.cores.iter().find(|c| c.cpu == cpu)?;
        Some(format!(
            "; softirqs {:.0}% of that core",
            core.softirq * 100.0
        ))
    });
    let softirq = softirq.unwrap_or_default();
    let at = format!(
        "{}{} {} thread",
        thread
            .cpu
            .map_or(String::new(), |cpu| format!("cpu {cpu}, ")),
        thread.side.as_str(),
        thread.role.as_str()
    );
    match host.and_then(|h| h.quota).filter(|q| q.cores < 1.0) {
        Some(quota) => Words {
            at,
            evidence: format!(
                "on a CPU {:.1}% of the time, waiting for one {:.0}%, under a CPU quota of \
                 {:.1}% that ran out in {:.0}% of its periods{softirq}",
                thread.used * 100.0,
                thread.waited * 100.0,
                quota.cores * 100.0,
                quota.throttled_periods_share * 100.0
            ),
            advice: Some(format!(
                "raise the CPU quota of the {} end's cgroup (cpu.max, or cpu.cfs_quota_us)",
                thread.side.as_str()
            )),
        },
        None => Words {
            at,
            evidence: format!("{}{softirq}", thread.time_words()),
            advice: Some("more streams (-P) spread it over cores".into()),
        },
    }
}

/// The receiver's window: what held it and the buffer that would carry `wire`.
fn window_words(
    figures: &Figures,
    rate: f64,
    receiver: Side,
    carried: String,
    wire: Option<f64>,
) -> Words {
    let limits = figures.hosts.get(&receiver).map(|h| h.buffers);
    let rmem = limits.and_then(|l| l.tcp_rmem_max);
    let advice = match (figures.window_scaled, rmem, wire) {
        (Some(false), _, _) => Some(
            "window scaling is off, so no window passes 64 KiB: set \
             net.ipv4.tcp_window_scaling=1 at both ends"
                .to_string(),
        ),
        (_, Some(max), Some(wire)) if figures.window_set => Some(format!(
            "raise -w to {} or more (net.core.rmem_max on the receiver allows {})",
            scaled(figures.receive_buffer_bytes.unwrap_or(max), rate, wire),
            limits
                .and_then(|l| l.rmem_max)
                .map_or("?".into(), format_size)
        )),
        (_, Some(max), Some(wire)) => Some(format!(
            "raise net.ipv4.tcp_rmem's max on the receiver to {} or more (now {}) \
             for the {} the wire carries",
            scaled(max, rate, wire),
            format_size(max),
            format_bits_rate(wire)
        )),
        (_, Some(max), None) => Some(format!(
            "raise net.ipv4.tcp_rmem's max on the receiver (now {}): the window's \
             ceiling grows with it, {} per {}; give --link-rate to have the size \
             that would fill the link",
            format_size(max),
            format_bits_rate(rate),
            format_size(max)
        )),
        _ => Some("raise the receiver's TCP receive buffer (net.ipv4.tcp_rmem's max)".into()),
    };
    Words {
        at: end(receiver, "the receiver"),
        evidence: format!(
            "the receiver's window held the sender {} of its time: {} at {} round trip \
             carries {}{}",
            pct(figures.share(figures.rwnd_s)),
            format_bytes(figures.window_bytes.unwrap_or(0)),
            ms(figures.srtt_us),
            carried,
            if wire.is_some_and(|w| w > rate * 1.2) {
                "; the path could carry more"
            } else {
                ""
            }
        ),
        advice,
    }
}

/// The sender's buffer: what held it and the buffer that would carry `wire`.
fn buffer_words(figures: &Figures, rate: f64, sender: Side, wire: Option<f64>) -> Words {
    let wmem = figures
        .hosts
        .get(&sender)
        .and_then(|h| h.buffers.tcp_wmem_max);
    let advice = match (wmem, wire) {
        (Some(max), Some(wire)) => format!(
            "raise net.ipv4.tcp_wmem's max on the sender to {} or more (now {})",
            scaled(max, rate, wire),
            format_size(max)
        ),
        (Some(max), None) => format!(
            "raise net.ipv4.tcp_wmem's max on the sender (now {}): the buffer's \
             ceiling grows with it",
            format_size(max)
        ),
        _ => "raise the sender's TCP send buffer (net.ipv4.tcp_wmem's max)".into(),
    };
    Words {
        at: end(sender, "the sender"),
        evidence: format!(
            "the sender's own buffer, {} (SO_SNDBUF), held it {} of its time with all \
             it held in flight, at {} round trip",
            figures.send_buffer_bytes.map_or("?".into(), format_size),
            pct(figures.share(figures.sndbuf_s)),
            ms(figures.srtt_us)
        ),
        advice: Some(advice),
    }
}
