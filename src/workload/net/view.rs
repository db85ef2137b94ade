//! How ratelab judges and shows a stored net test: the received rate against the
//! link's goodput limit, the stream ends whose CPU core was the limit, and tables of
//! the intervals and of each stream end.

use super::item::Heading;
use super::item::{NetItem, Scope, Side};
use super::kind::{NetKind, share_of_core};
use super::limit::Cause;
use super::protocol::Direction;
use super::report::Role;
use super::summary::{self, NetSummary, Totals, cpu_fraction, interval_sums, limit, nominal_s};
use super::{brief, charts};
use crate::document::{Severity, Verdict};
use crate::vocab::Exposure;
use crate::vocab::units::{format_bits_rate, gbit_per_sec};
use crate::vocab::{Chart, GroupKey, LinkLimit, RateUnit, Samples, SummaryLine, Table, Unmeasured};
use crate::workload::{DecodeError, Decoded, Stored, View};
use std::borrow::Cow;
use std::collections::BTreeMap;

impl View for Stored<'_, NetKind> {
    fn exposure(&self) -> Exposure {
        let moved = self
            .items
            .iter()
            .filter(|i| i.scope == Scope::Stream && i.side == Side::Local)
            .map(|i| i.bytes)
            .sum();
        Exposure {
            network_bytes: Some(moved),
            ..Exposure::CPU
        }
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        // A test that received nothing has no figure to judge.
        let Some(receive) =
            summary::totals(&self.items, Role::Receive, None, nominal_s(&self.params))
        else {
            return Ok(Vec::new());
        };
        let mut out = vec![link_verdict(self, &receive)];
        out.extend(cpu_bound_verdicts(self));
        out.extend(failure_verdict(self));
        Ok(out)
    }

    fn link_limit(&self) -> Option<LinkLimit> {
        let limit = self.context.goodput_limit_bytes_per_sec?;
        Some(LinkLimit {
            limit: format_bits_rate(limit),
            from: "TCP goodput of the link".into(),
        })
    }

    /// The receive rate in each interval, all streams of a direction together.
    fn samples(&self) -> Option<Samples> {
        let mut by_interval: BTreeMap<(&str, u64), f64> = BTreeMap::new();
        for item in &self.items {
            if item.scope != Scope::Interval || item.op != Role::Receive {
                continue;
            }
            let direction = item.direction.map_or("?", Heading::as_str);
            *by_interval
                .entry((direction, item.interval.unwrap_or(0)))
                .or_default() += item.bytes_per_sec;
        }
        let items = by_interval
            .into_iter()
            .map(|((direction, _), rate)| {
                (
                    GroupKey::new(RateUnit::BytesPerSecInBits, format!("receive {direction}")),
                    Some(rate),
                )
            })
            .collect();
        Some(Samples { items })
    }

    fn summary_lines(&self, _run: &Decoded) -> Result<Vec<SummaryLine>, DecodeError> {
        Ok(brief::summary_lines(self))
    }

    fn unmeasured(&self) -> Vec<Unmeasured> {
        brief::unmeasured(self)
    }

    fn brief_tables(&self) -> Vec<Table> {
        brief::brief_tables(self)
    }

    fn charts(&self) -> Vec<Chart> {
        let summary = self.summary.as_ref().map_or_else(
            || Cow::Owned(summary::summarize(&self.params, &self.context, &self.items)),
            Cow::Borrowed,
        );
        charts::charts(&self.items, &summary, nominal_s(&self.params))
    }

    fn tables(&self) -> Vec<Table> {
        // A run that never finished stored no summary; its items still tell the totals.
        let summary = self.summary.as_ref().map_or_else(
            || Cow::Owned(summary::summarize(&self.params, &self.context, &self.items)),
            Cow::Borrowed,
        );
        vec![interval_table(self, &summary), stream_table(self)]
    }
}

/// The test's headline figures over its rates per nominal interval, sent and received,
/// of each direction of a test in both.
fn interval_table(w: &Stored<NetKind>, summary: &NetSummary) -> Table {
    let directions: Vec<Option<Heading>> = if w.params.direction == Direction::Bidir {
        vec![Some(Heading::Up), Some(Heading::Down)]
    } else {
        vec![None]
    };
    let rows = directions
        .iter()
        .flat_map(|direction| interval_rows(w, *direction))
        .collect();
    let mut header = vec!["interval s".to_string()];
    if directions.len() > 1 {
        header.push("direction".into());
    }
    header.extend(["sent Gbit/s", "received Gbit/s"].map(String::from));
    if w.params.udp.is_some() {
        header.extend(["datagrams", "lost", "jitter ms"].map(String::from));
    } else {
        header.push("retransmits".into());
    }
    let first_figure = if directions.len() > 1 { 2 } else { 1 };
    Table {
        title: headline(w, summary),
        numeric: (first_figure..header.len()).collect(),
        header,
        rows,
    }
}

/// Each stream end's totals, its datagrams (UDP) or TCP state, and CPU.
fn stream_table(w: &Stored<NetKind>) -> Table {
    if w.params.udp.is_some() {
        return datagram_table(w);
    }
    let items = &w.items;
    let how = how_sent(w);
    let title = if how.is_empty() {
        "each stream end".to_string()
    } else {
        format!("each stream end · {}", how.join(" · "))
    };
    let rows = items
        .iter()
        .filter(|i| i.scope == Scope::Stream)
        .map(|i| {
            vec![
                i.stream.map_or("-".into(), |s| s.to_string()),
                i.direction.map_or(String::new(), |d| d.to_string()),
                format!("{} {}", i.side.as_str(), i.op),
                gbit_per_sec(i.bytes_per_sec),
                i.retransmits.map_or("-".into(), |r| r.to_string()),
                i.cwnd_bytes.map_or("-".into(), |c| format!("{}", c / 1000)),
                i.rtt_us
                    .map_or("-".into(), |r| format!("{:.2}", r as f64 / 1000.0)),
                i.mss_bytes.map_or("-".into(), |m| m.to_string()),
                i.cpu_seconds
                    .filter(|_| i.seconds > 0.0)
                    .map_or("-".into(), |c| format!("{:.0}%", c / i.seconds * 100.0)),
            ]
        })
        .collect();
    Table {
        title,
        header: [
            "stream",
            "direction",
            "end",
            "Gbit/s",
            "retransmits",
            "cwnd kB",
            "rtt ms",
            "mss",
            "cpu",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![0, 3, 4, 5, 6, 7, 8],
    }
}

/// Each UDP stream end's totals, datagrams and CPU: a sender's sent, a receiver's
/// received, lost (of the highest count it saw), jitter and out of order.
fn datagram_table(w: &Stored<NetKind>) -> Table {
    let rows = w
        .items
        .iter()
        .filter(|i| i.scope == Scope::Stream)
        .map(|i| {
            let d = i.datagrams.unwrap_or_default();
            let received = i.op == Role::Receive;
            let figure = |shown: bool, text: String| if shown { text } else { "-".into() };
            vec![
                i.stream.map_or("-".into(), |s| s.to_string()),
                i.direction.map_or(String::new(), |d| d.to_string()),
                format!("{} {}", i.side.as_str(), i.op),
                gbit_per_sec(i.bytes_per_sec),
                d.count.to_string(),
                figure(received, d.lost.to_string()),
                figure(
                    received && d.highest > 0,
                    brief::format_lost_share(d.lost as f64 / d.highest.max(1) as f64),
                ),
                figure(received, format!("{:.3}", d.jitter_s * 1e3)),
                figure(
                    received,
                    d.out_of_order.map_or("-".into(), |n| n.to_string()),
                ),
                i.cpu_seconds
                    .filter(|_| i.seconds > 0.0)
                    .map_or("-".into(), |c| format!("{:.0}%", c / i.seconds * 100.0)),
            ]
        })
        .collect();
    Table {
        title: "each stream end".into(),
        header: [
            "stream",
            "direction",
            "end",
            "Gbit/s",
            "datagrams",
            "lost",
            "lost %",
            "jitter ms",
            "out of order",
            "cpu",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![0, 3, 4, 5, 6, 7, 8, 9],
    }
}

/// The received rate against the link: above its limit, a share of it, or why there is
/// no limit to compare with.
fn link_verdict(w: &Stored<NetKind>, receive: &Totals) -> Verdict {
    let verdict = Verdict::about(Some(w.index()));
    let (context, target) = (&w.context, &w.record.target);
    match limit(&w.params, context) {
        Some(limit) if receive.bytes_per_sec > limit * OVER_LIMIT => verdict(
            "faster_than_link",
            Severity::Error,
            format!(
                "received {} over {target}, above the {} goodput limit of its link: is the link rate right?",
                format_bits_rate(receive.bytes_per_sec),
                format_bits_rate(limit)
            ),
        ),
        Some(limit) => verdict(
            "share_of_link",
            Severity::Info,
            format!(
                "received {}: {:.1}% of the {} of TCP payload a {} link carries at MTU {} (MSS {})",
                format_bits_rate(receive.bytes_per_sec),
                receive.bytes_per_sec / limit * 100.0,
                format_bits_rate(limit),
                format_bits_rate(context.link_bits_per_sec.unwrap_or(0.0) / 8.0),
                context.mtu_bytes.map_or("?".into(), |m| m.to_string()),
                context.mss_bytes.map_or("?".into(), |m| m.to_string()),
            ),
        ),
        None if context
            .interface
            .as_ref()
            .is_some_and(|nic| nic.kind == "loopback") =>
        {
            verdict(
                "loopback",
                Severity::Info,
                format!(
                    "over loopback no wire limits {}: the {} is what this machine's CPUs and \
                     memory copy (sending end {} of a core, receiving end {}; the kernel's receive \
                     work is often charged to the sender)",
                    if w.params.udp.is_some() { "UDP" } else { "TCP" },
                    format_bits_rate(receive.bytes_per_sec),
                    share_of_core(cpu_fraction(&w.items, Side::Local)),
                    share_of_core(cpu_fraction(&w.items, Side::Remote))
                ),
            )
        }
        None => {
            verdict(
                "link_unknown",
                Severity::Info,
                format!(
                    "the speed of the link to {target} is unknown ({}): give --link-rate to compare with it",
                    context.interface.as_ref().map_or(
                        "no interface found".to_string(),
                        |nic| format!("{}, {}", nic.name, nic.kind)
                    )
                ),
            )
        }
    }
}

/// Per end, its busiest stream thread, where that thread's core was the limit; none
/// where the summary's limit names a CPU already, as it says more.
fn cpu_bound_verdicts(w: &Stored<NetKind>) -> Vec<Verdict> {
    let summary = brief::summary_of(w);
    if summary
        .limits()
        .any(|(_, l)| matches!(l.cause, Some(Cause::SenderCpu | Cause::ReceiverCpu)))
    {
        return Vec::new();
    }
    let verdict = Verdict::about(Some(w.index()));
    let mut out = Vec::new();
    for side in [Side::Local, Side::Remote] {
        let busiest = w
            .items
            .iter()
            .filter(|i| i.scope == Scope::Stream && i.side == side && i.seconds > 0.0)
            .filter_map(|i| Some((i, i.cpu_seconds? / i.seconds)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((stream, fraction)) = busiest.filter(|(_, f)| *f >= CPU_BOUND) {
            out.push(verdict(
                "cpu_bound",
                Severity::Warning,
                format!(
                    "the {} end's {} thread of stream {} was busy {:.0}% of the test: its CPU core, not the network, limits this figure",
                    side.as_str(),
                    stream.op,
                    stream.stream.unwrap_or(0),
                    fraction * 100.0
                ),
            ));
        }
    }
    out
}

/// The stream ends that stopped early, if any did.
fn failure_verdict(w: &Stored<NetKind>) -> Option<Verdict> {
    let failed: Vec<&NetItem> = w.items.iter().filter(|i| i.error.is_some()).collect();
    let first = failed.first()?;
    Some(Verdict::about(Some(w.index()))(
        "stream_failed",
        Severity::Error,
        format!(
            "{} stream ends stopped early; the first: {}",
            failed.len(),
            first.error.as_deref().unwrap_or("")
        ),
    ))
}

/// One row per nominal interval received in `direction` (or in all).
fn interval_rows(w: &Stored<NetKind>, direction: Option<Heading>) -> Vec<Vec<String>> {
    let nominal_s = nominal_s(&w.params);
    let sent = interval_sums(&w.items, Role::Send, direction, nominal_s);
    let received = interval_sums(&w.items, Role::Receive, direction, nominal_s);
    let mut rows = Vec::new();
    for sum in &received {
        let sender = sent.iter().find(|s| s.index == sum.index);
        let of_interval = |role: Role| {
            w.items
                .iter()
                .filter(move |i| i.scope == Scope::Interval && i.op == role)
                .filter(move |i| direction.is_none_or(|d| i.direction == Some(d)))
                .filter(move |i| i.interval == Some(sum.index))
        };
        // Named by its nominal stretch; a stalled interval ran longer.
        let mut row = vec![format!(
            "{:.1}-{:.1}",
            sum.index as f64 * nominal_s,
            (sum.index + 1) as f64 * nominal_s
        )];
        if let Some(d) = direction {
            row.push(d.to_string());
        }
        row.extend([
            sender.map_or("-".into(), |s| gbit_per_sec(s.bytes_per_sec)),
            gbit_per_sec(sum.bytes_per_sec),
        ]);
        if w.params.udp.is_some() {
            let each: Vec<_> = of_interval(Role::Receive)
                .filter_map(|i| i.datagrams)
                .collect();
            let jitter = each.iter().map(|d| d.jitter_s).sum::<f64>() / each.len().max(1) as f64;
            row.extend([
                each.iter()
                    .fold(0u64, |sum, d| sum.saturating_add(d.count))
                    .to_string(),
                each.iter()
                    .fold(0u64, |sum, d| sum.saturating_add(d.lost))
                    .to_string(),
                format!("{:.3}", jitter * 1e3),
            ]);
        } else {
            let retransmits: u64 = of_interval(Role::Send).filter_map(|i| i.retransmits).sum();
            row.push(retransmits.to_string());
        }
        rows.push(row);
    }
    rows
}

/// The test in one line: streams, target, rates sent and received, share of the link
/// and both ends' CPU.
fn headline(w: &Stored<NetKind>, summary: &NetSummary) -> String {
    let rate =
        |totals: Option<&Totals>| totals.map_or("-".into(), |t| format_bits_rate(t.bytes_per_sec));
    let streams = w.params.streams;
    let mut title = format!(
        "{streams} stream{}{} to {}: sent {}, received {}",
        if streams == 1 { "" } else { "s" },
        if w.params.direction == Direction::Bidir {
            " each way"
        } else {
            ""
        },
        w.record.target,
        rate(summary.send.as_ref()),
        rate(summary.receive.as_ref()),
    );
    if let Some(share) = summary.share_of_goodput_limit {
        title.push_str(&format!(
            " ({:.1}% of the link's goodput limit)",
            share * 100.0
        ));
    }
    if let Some(datagrams) = summary.receive.as_ref().and_then(|r| r.datagrams.as_ref()) {
        title.push_str(&brief::datagrams_text(datagrams, summary.send.as_ref()));
    }
    title.push_str(&format!(
        " · CPU of one core: local {}, remote {}",
        share_of_core(summary.cpu.local_fraction),
        share_of_core(summary.cpu.remote_fraction)
    ));
    title
}

/// How the test's connections were set up beyond the defaults, in words: the
/// congestion control of each end, and what the test asked of its sockets and loops.
fn how_sent(w: &Stored<NetKind>) -> Vec<String> {
    let congestion = |side: Side| {
        w.items
            .iter()
            .filter(|i| i.scope == Scope::Stream && i.side == side)
            .find_map(|i| i.congestion.clone())
    };
    let mut words = Vec::new();
    match (congestion(Side::Local), congestion(Side::Remote)) {
        (Some(local), Some(remote)) if local == remote => {
            words.push(format!("congestion control {local}"));
        }
        (Some(local), Some(remote)) => {
            words.push(format!(
                "congestion control {local} (local), {remote} (remote)"
            ));
        }
        (Some(one), None) | (None, Some(one)) => words.push(format!("congestion control {one}")),
        (None, None) => {}
    }
    let o = &w.params.options;
    if let Some(rate) = o.pacing_bytes_per_sec {
        words.push(format!(
            "paced by the kernel at {} a connection",
            format_bits_rate(rate as f64)
        ));
    }
    if let Some(bits) = o.bitrate_bits_per_sec {
        let burst = o
            .burst_blocks
            .map_or(String::new(), |b| format!(", {b} blocks at once"));
        words.push(format!(
            "each sender paced to {}{burst}",
            format_bits_rate(bits as f64 / 8.0)
        ));
    }
    if let Some(tos) = o.tos {
        words.push(format!("TOS {tos:#04x}"));
    }
    for (on, what) in [
        (o.nodelay, "TCP_NODELAY"),
        (o.dont_fragment, "don't fragment"),
        (o.zerocopy, "sent by sendfile"),
        (o.repeating_payload, "a repeating payload"),
        (o.skip_rx_copy, "received without a copy"),
    ] {
        if on {
            words.push(what.to_string());
        }
    }
    words
}

/// Results above the goodput limit by more than this are not believed.
const OVER_LIMIT: f64 = 1.03;

/// Share of a core above which a stream's thread is taken as the limit.
const CPU_BOUND: f64 = 0.9;

#[cfg(test)]
mod tests {
    use super::super::kind::*;
    use super::super::*;
    use crate::workload::Kind;
    use crate::workload::decoded::asked;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::document::{RunDocument, WorkloadRecord};

    /// A stored net workload of two streams to `host` holding `items`.
    fn record(items: Vec<Value>) -> WorkloadRecord {
        let mut record = WorkloadRecord::for_test(NetKind::NAME, "host:5301", items);
        let plan = NetPlan {
            host: "host".into(),
            port: 5301,
            own_server: false,
            ..NetPlan::loopback(Duration::from_secs(1), 2)
        };
        record.params = serde_json::to_value(plan).unwrap();
        record.context = serde_json::to_value(NetContext::default()).unwrap();
        record
    }

    fn interval(op: &str, side: &str, stream: u32, bytes: u64) -> Value {
        json!({"op": op, "scope": "interval", "side": side, "direction": "up",
               "stream": stream, "interval": 0, "start_s": 0.0, "end_s": 1.0, "bytes": bytes,
               "seconds": 1.0, "bytes_per_sec": bytes as f64})
    }

    #[test]
    fn compare_adds_up_the_streams_of_an_interval_and_leaves_out_sends() {
        let doc = RunDocument::for_test(vec![record(vec![
            interval("receive", "remote", 0, 10),
            interval("receive", "remote", 1, 20),
            interval("send", "local", 0, 10),
        ])]);
        let samples = asked::of(&doc, 0, |w, _| w.samples())
            .unwrap()
            .expect("net items are compared");
        assert_eq!(
            samples.items,
            [(
                GroupKey::new(RateUnit::BytesPerSecInBits, "receive up"),
                Some(30.0)
            )],
            "streams of one interval add up"
        );
    }

    #[test]
    fn a_corrupt_item_is_reported_with_its_run_workload_and_number() {
        let mut corrupt = interval("receive", "remote", 1, 20);
        corrupt.as_object_mut().unwrap().remove("op");
        let doc = RunDocument::for_test(vec![record(vec![
            interval("receive", "remote", 0, 10),
            corrupt,
        ])]);
        let error =
            asked::of(&doc, 0, |w, _| w.tables()).expect_err("a corrupt item is not passed over");
        let message = error.to_string();
        for part in ["run 1, workload 1 (net)", "item 2", "`op`"] {
            assert!(message.contains(part), "{part:?} missing from: {message}");
        }
    }

    #[test]
    fn tables_without_a_stored_summary_show_what_its_items_say() {
        let mut doc = RunDocument::for_test(vec![record(vec![
            json!({"op": "receive", "scope": "stream", "side": "remote", "direction": "up",
                   "stream": 0, "start_s": 0.0, "end_s": 1.0, "bytes": 10,
                   "seconds": 1.0, "bytes_per_sec": 10.0, "cpu_seconds": 0.5}),
            interval("receive", "remote", 0, 10),
        ])]);
        let unsummarised = asked::of(&doc, 0, |w, _| w.tables()).unwrap();
        doc.workloads[0].summary = asked::concluded(&doc, 0).map(|c| c.summary).unwrap();
        let summarised = asked::of(&doc, 0, |w, _| w.tables()).unwrap();
        assert_eq!(unsummarised, summarised);
        assert!(
            summarised[0]
                .title
                .starts_with("2 streams to host:5301: sent -, received "),
            "{}",
            summarised[0].title
        );
    }

    #[test]
    fn the_stream_table_says_how_the_connections_were_set_up() {
        let stream = |side: &str, congestion: &str| {
            json!({"op": if side == "local" { "send" } else { "receive" }, "scope": "stream",
                   "side": side, "direction": "up", "stream": 0, "start_s": 0.0, "end_s": 1.0,
                   "bytes": 10, "seconds": 1.0, "bytes_per_sec": 10.0, "congestion": congestion})
        };
        let mut doc = RunDocument::for_test(vec![record(vec![
            stream("local", "reno"),
            stream("remote", "reno"),
        ])]);
        let plain = asked::of(&doc, 0, |w, _| w.tables()).unwrap();
        assert_eq!(plain[1].title, "each stream end · congestion control reno");
        doc.workloads[0].params["options"] = json!({"pacing_bytes_per_sec": 125_000_000,
            "bitrate_bits_per_sec": 500_000_000u64, "burst_blocks": 4, "tos": 16, "zerocopy": true});
        doc.workloads[0].items[1]["congestion"] = json!("cubic");
        let asked = asked::of(&doc, 0, |w, _| w.tables()).unwrap();
        assert_eq!(
            asked[1].title,
            "each stream end · congestion control reno (local), cubic (remote) · paced by the \
             kernel at 1.00 Gbit/s a connection · each sender paced to 500 Mbit/s, 4 blocks at \
             once · TOS 0x10 · sent by sendfile"
        );
    }
}
