//! A net test at a glance: its line of the run's summary (what the receivers got,
//! against the link's goodput limit or why there is none, both ends' CPU), no brief
//! table, and the link speed it could not find.

use std::borrow::Cow;

use super::kind::{NetKind, share_of_core};
use super::limit::{Cause, Limit};
use super::summary::{DatagramTotals, NetSummary, Totals};
use crate::vocab::units::format_bits_rate;
use crate::vocab::{SummaryLine, Table, Unmeasured};
use crate::workload::Stored;

/// Its summary, stored or, for a run that never finished, from its items.
pub(super) fn summary_of<'a>(w: &'a Stored<NetKind>) -> Cow<'a, NetSummary> {
    w.summary.as_ref().map_or_else(
        || Cow::Owned(super::summary::summarize(&w.params, &w.context, &w.items)),
        Cow::Borrowed,
    )
}

/// Whether the test ran over the loopback interface, where no wire limits TCP.
fn over_loopback(w: &Stored<NetKind>) -> bool {
    w.context
        .interface
        .as_ref()
        .is_some_and(|nic| nic.kind == "loopback")
}

/// The test's line of the summary: received, sent, both ends' CPU, and against what
/// limit.
pub fn summary_lines(w: &Stored<NetKind>) -> Vec<SummaryLine> {
    let summary = summary_of(w);
    let mut lines: Vec<SummaryLine> = network_line(w, &summary).into_iter().collect();
    // A run whose receiver's report never came still says why, from its sender.
    for (direction, limit) in summary.limits() {
        let direction = direction.map_or(String::new(), |d| format!("{d}: "));
        lines.push(SummaryLine::new(
            "limit",
            format!("{direction}{}", limit_text(limit)),
        ));
    }
    lines
}

/// The network line: received, sent, both ends' CPU and the link's limit; none where
/// nothing was received.
fn network_line(w: &Stored<NetKind>, summary: &NetSummary) -> Option<SummaryLine> {
    let receive = summary.receive.as_ref()?;
    let streams = w.params.streams;
    let mut text = format!(
        "{}, {streams} stream{}: received {}",
        w.record.target,
        if streams == 1 { "" } else { "s" },
        format_bits_rate(receive.bytes_per_sec),
    );
    if let Some(send) = &summary.send {
        text.push_str(&format!(", sent {}", format_bits_rate(send.bytes_per_sec)));
    }
    match (
        summary.share_of_goodput_limit,
        summary.goodput_limit_bytes_per_sec,
    ) {
        (Some(share), Some(limit)) => text.push_str(&format!(
            " ({:.1}% of the link's goodput limit of {})",
            share * 100.0,
            format_bits_rate(limit)
        )),
        _ if over_loopback(w) => text.push_str(" (no wire limits loopback)"),
        _ => {}
    }
    if let Some(datagrams) = &receive.datagrams {
        text.push_str(&datagrams_text(datagrams, summary.send.as_ref()));
    }
    text.push_str(&format!(
        "; CPU of one core: local {}, remote {}",
        share_of_core(summary.cpu.local_fraction),
        share_of_core(summary.cpu.remote_fraction)
    ));
    Some(SummaryLine::new("network", text).covering(&["share_of_link", "loopback"]))
}

/// A UDP test's receivers in words: what was lost of what was sent, and the jitter.
pub(super) fn datagrams_text(received: &DatagramTotals, send: Option<&Totals>) -> String {
    let sent = send.and_then(|s| s.datagrams.as_ref()).map(|d| d.count);
    let of = sent.map_or(String::new(), |n| format!(" of {n}"));
    let share = received
        .lost_share
        .map_or(String::new(), |s| format!(" ({})", format_lost_share(s)));
    let jitter = received
        .jitter_s
        .map_or(String::new(), |j| format!(", jitter {:.3} ms", j * 1e3));
    format!("; lost {}{of} datagrams{share}{jitter}", received.lost)
}

/// A share of datagrams lost: to a hundredth of a percent where it is small.
pub(super) fn format_lost_share(share: f64) -> String {
    if share > 0.0 && share < 0.01 {
        format!("{:.2}%", share * 100.0)
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

/// A limit in one line: the cause, where, the figures that show it, what to change.
fn limit_text(limit: &Limit) -> String {
    let cause = match limit.cause {
        None => "cannot be told",
        Some(Cause::Path) => "limited by the path",
        Some(Cause::ReceiveWindow) => "limited by the receiver's window",
        Some(Cause::SendBuffer) => "limited by the sender's buffer",
        Some(Cause::Loss) => "limited by loss",
        Some(Cause::SenderCpu) => "limited by the sender's CPU",
        Some(Cause::ReceiverCpu) => "limited by the receiver's CPU",
        Some(Cause::MtuBlackHole) => "stalled in an MTU black hole",
        Some(Cause::SlowStart) => "still opening its window",
        Some(Cause::SenderApp) => "limited by the sending program",
        Some(Cause::Peer) => "limited by the peer's CPU",
        Some(Cause::Unknown) => "limited by a cause this version does not know",
    };
    let mut text = format!("{cause} ({}): {}", limit.at, limit.evidence);
    if let Some(advice) = &limit.advice {
        let mut chars = advice.chars();
        let first = chars.next().map(|c| c.to_uppercase().to_string());
        text.push_str(&format!(
            ". {}{}",
            first.unwrap_or_default(),
            chars.as_str()
        ));
    }
    text
}

/// The link speed it could not find, and why.
pub fn unmeasured(w: &Stored<NetKind>) -> Vec<Unmeasured> {
    if w.context.goodput_limit_bytes_per_sec.is_some() || over_loopback(w) {
        return Vec::new();
    }
    let why = w
        .context
        .interface
        .as_ref()
        .map_or("no interface found".to_string(), |nic| {
            format!("{} ({}) does not report it", nic.name, nic.kind)
        });
    vec![Unmeasured {
        codes: vec!["link_unknown".into()],
        what: format!("the link speed to {}", w.record.target),
        why,
    }]
}

/// None: the summary line holds the test's figures; its intervals and each stream
/// end's are in the full report.
pub fn brief_tables(_w: &Stored<NetKind>) -> Vec<Table> {
    Vec::new()
}
