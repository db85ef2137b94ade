//! How ratelab summarises, judges and shows a stored net test: sender and receiver
//! totals (the receiver's is the headline, as iperf3's), interval statistics, TCP state,
//! both ends' CPU, and the result as a share of the link's goodput limit.

use crate::workload::Stored;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::item::{NetItem, Scope, Side, net_items};
use super::report::Role;
use crate::analysis::stats::Stats;
use crate::document::{Severity, Verdict, WorkloadRecord};
use crate::vocab::units::{format_bits_rate, gbit_per_sec};
use crate::vocab::{GroupKey, LinkLimit, RateUnit, Samples, Table};

/// Share of a core above which a stream's thread is taken as the limit.
const CPU_BOUND: f64 = 0.9;
/// Results above the goodput limit by more than this are not believed.
const OVER_LIMIT: f64 = 1.03;

/// Totals of one role (all senders, or all receivers).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Totals {
    /// Bytes moved by every stream.
    pub bytes: u64,
    /// The longest stream's time.
    pub seconds: f64,
    /// All bytes over the longest stream's time: the headline figure.
    pub bytes_per_sec: f64,
    /// Statistics of the interval rates, summed over streams; full intervals only.
    pub intervals: Option<Stats>,
}

fn totals(
    items: &[NetItem],
    role: Role,
    direction: Option<&str>,
    nominal_s: f64,
) -> Option<Totals> {
    let in_scope = |i: &&NetItem| direction.is_none_or(|d| i.direction.as_deref() == Some(d));
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
            bytes as f64 / seconds
        } else {
            0.0
        },
        intervals: Stats::of(&rates),
    })
}

/// One nominal interval of one role, summed over streams.
#[derive(Debug, Clone, Copy, PartialEq)]
struct IntervalSum {
    index: u64,
    start_s: f64,
    end_s: f64,
    bytes: u64,
    /// The sum of each stream's rate in the interval.
    bytes_per_sec: f64,
}

/// Per nominal interval of `role`, the streams' bytes and rates summed; a stream's last
/// interval is left out when it is shorter than half the nominal length (partial).
fn interval_sums(
    items: &[NetItem],
    role: Role,
    direction: Option<&str>,
    nominal_s: f64,
) -> Vec<IntervalSum> {
    let of_role: Vec<&NetItem> = items
        .iter()
        .filter(|i| i.scope == Scope::Interval && i.op == role.as_str())
        .filter(|i| direction.is_none_or(|d| i.direction.as_deref() == Some(d)))
        .collect();
    // Each stream end's last interval is cut short by the test's end; a short one
    // after a stall is whole and stays.
    let mut last: std::collections::HashMap<(Side, Option<u32>), u64> = Default::default();
    for item in &of_role {
        let index = item.interval.unwrap_or(0);
        let entry = last.entry((item.side, item.stream)).or_insert(index);
        *entry = (*entry).max(index);
    }
    let intervals = of_role.iter().filter(|i| {
        i.seconds >= nominal_s * 0.5 || i.interval != last.get(&(i.side, i.stream)).copied()
    });
    let mut sums: std::collections::BTreeMap<u64, IntervalSum> = Default::default();
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

/// The nominal interval length of a record, seconds.
fn nominal_s(record: &WorkloadRecord) -> f64 {
    record.params["interval_ms"].as_f64().unwrap_or(1000.0) / 1000.0
}

fn cpu_fraction(items: &[NetItem], side: Side) -> Option<f64> {
    items
        .iter()
        .find(|i| i.scope == Scope::Cpu && i.side == side)
        .and_then(|i| Some(i.cpu_seconds? / i.seconds).filter(|f| f.is_finite()))
}

/// The goodput limit of the record's link for the test, if known: links are full
/// duplex, so a test in both directions may carry twice one direction's limit.
fn limit(record: &WorkloadRecord) -> Option<f64> {
    let directions = if record.params["direction"] == "bidir" {
        2.0
    } else {
        1.0
    };
    record.context["goodput_limit_bytes_per_sec"]
        .as_f64()
        .map(|l| l * directions)
}

/// How ratelab summarises, judges and shows stored net workloads.
pub struct NetKind;

impl crate::workload::Kind for NetKind {
    const NAME: &'static str = "net";
    type Params = Value;
    type Context = Value;
    type Item = Value;
    type Summary = Value;

    fn summarize(&self, w: &Stored<Self>) -> Value {
        let record = w.record;
        let items = net_items(&record.items);
        let receive = totals(&items, Role::Receive, None, nominal_s(record));
        let mut summary = json!({
            "send": totals(&items, Role::Send, None, nominal_s(record)),
            "receive": receive,
            "streams": record.params["streams"],
            "mss_bytes": record.context["mss_bytes"],
            "mtu_bytes": record.context["mtu_bytes"],
            "retransmits": items.iter().filter(|i| i.is_stream(Role::Send)).filter_map(|i| i.retransmits).sum::<u64>(),
            "cpu": {
                "local_fraction": cpu_fraction(&items, Side::Local),
                "remote_fraction": cpu_fraction(&items, Side::Remote),
            },
            "goodput_limit_bytes_per_sec": limit(record),
            "share_of_goodput_limit": limit(record).zip(receive.as_ref()).map(|(l, r)| r.bytes_per_sec / l),
        });
        if record.params["direction"] == "bidir" {
            for direction in ["up", "down"] {
                summary[direction] = json!({
                    "send": totals(&items, Role::Send, Some(direction), nominal_s(record)),
                    "receive": totals(&items, Role::Receive, Some(direction), nominal_s(record)),
                });
            }
        }
        summary
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (workload, record) = (w.index(), w.record);
        let items = net_items(&record.items);
        let verdict = Verdict::about(Some(workload));
        let mut out = Vec::new();
        let Some(receive) = totals(&items, Role::Receive, None, nominal_s(record)) else {
            return out;
        };
        let mtu = record.context["mtu_bytes"].as_u64();
        let mss = record.context["mss_bytes"].as_u64();
        match limit(record) {
            Some(limit) if receive.bytes_per_sec > limit * OVER_LIMIT => out.push(verdict(
                "faster_than_link",
                Severity::Error,
                format!(
                    "received {} over {}, above the {} goodput limit of its link: is the link rate right?",
                    format_bits_rate(receive.bytes_per_sec),
                    record.target,
                    format_bits_rate(limit)
                ),
            )),
            Some(limit) => out.push(verdict(
                "share_of_link",
                Severity::Info,
                format!(
                    "received {}: {:.1}% of the {} of TCP payload a {} link carries at MTU {} (MSS {})",
                    format_bits_rate(receive.bytes_per_sec),
                    receive.bytes_per_sec / limit * 100.0,
                    format_bits_rate(limit),
                    format_bits_rate(record.context["link_bits_per_sec"].as_f64().unwrap_or(0.0) / 8.0),
                    mtu.map_or("?".into(), |m| m.to_string()),
                    mss.map_or("?".into(), |m| m.to_string()),
                ),
            )),
            None if record.context["interface"]["kind"] == "loopback" => {
                let cpu = |side| {
                    cpu_fraction(&items, side).map_or("?".into(), |f| format!("{:.0}%", f * 100.0))
                };
                out.push(verdict(
                    "loopback",
                    Severity::Info,
                    format!(
                        "over loopback no wire limits TCP: the {} is what this machine's CPUs and memory \
                         copy (sending end {} of a core, receiving end {}; the kernel's receive work is \
                         often charged to the sender)",
                        format_bits_rate(receive.bytes_per_sec),
                        cpu(Side::Local),
                        cpu(Side::Remote)
                    ),
                ));
            }
            None => out.push(verdict(
                "link_unknown",
                Severity::Info,
                format!(
                    "the speed of the link to {} is unknown ({}): give --link-rate to compare with it",
                    record.target,
                    record.context["interface"]["name"]
                        .as_str()
                        .map_or("no interface found".to_string(), |n| format!(
                            "{n}, {}",
                            record.context["interface"]["kind"].as_str().unwrap_or("?")
                        ))
                ),
            )),
        }
        for side in [Side::Local, Side::Remote] {
            let busiest = items
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
                        if side == Side::Local { "local" } else { "remote" },
                        stream.op,
                        stream.stream.unwrap_or(0),
                        fraction * 100.0
                    ),
                ));
            }
        }
        let failed: Vec<&NetItem> = items.iter().filter(|i| i.error.is_some()).collect();
        if let Some(first) = failed.first() {
            out.push(verdict(
                "stream_failed",
                Severity::Error,
                format!(
                    "{} stream ends stopped early; the first: {}",
                    failed.len(),
                    first.error.as_deref().unwrap_or("")
                ),
            ));
        }
        out
    }

    fn link_limit(&self, w: &Stored<Self>) -> Option<LinkLimit> {
        let limit = w.record.context["goodput_limit_bytes_per_sec"].as_f64()?;
        Some(LinkLimit {
            limit: format_bits_rate(limit),
            from: "TCP goodput of the link".into(),
        })
    }

    /// The receive rate in each interval, all streams of a direction together.
    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        let mut by_interval: BTreeMap<(String, u64), f64> = BTreeMap::new();
        for item in net_items(&w.record.items) {
            if item.scope != Scope::Interval || item.op != "receive" {
                continue;
            }
            let direction = item.direction.unwrap_or_else(|| "?".into());
            *by_interval
                .entry((direction, item.interval.unwrap_or(0)))
                .or_default() += item.bytes_per_sec;
        }
        let items = by_interval
            .into_iter()
            .map(|((direction, _), rate)| {
                (GroupKey::op(format!("receive {direction}")), Some(rate))
            })
            .collect();
        Some(Samples {
            unit: RateUnit::BytesPerSecInBits,
            items,
        })
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let record = w.record;
        let items = net_items(&record.items);
        let directions: Vec<Option<&str>> = if record.params["direction"] == "bidir" {
            vec![Some("up"), Some("down")]
        } else {
            vec![None]
        };
        let mut intervals = Vec::new();
        for direction in &directions {
            let sent = interval_sums(&items, Role::Send, *direction, nominal_s(record));
            let received = interval_sums(&items, Role::Receive, *direction, nominal_s(record));
            for sum in &received {
                let sender = sent.iter().find(|s| s.index == sum.index);
                let retransmits: u64 = items
                    .iter()
                    .filter(|i| i.scope == Scope::Interval && i.op == "send")
                    .filter(|i| direction.is_none_or(|d| i.direction.as_deref() == Some(d)))
                    .filter(|i| i.interval == Some(sum.index))
                    .filter_map(|i| i.retransmits)
                    .sum();
                // Named by its nominal stretch; a stalled interval ran longer.
                let nominal = nominal_s(record);
                let mut row = vec![format!(
                    "{:.1}-{:.1}",
                    sum.index as f64 * nominal,
                    (sum.index + 1) as f64 * nominal
                )];
                if let Some(d) = direction {
                    row.push(d.to_string());
                }
                row.extend([
                    sender.map_or("-".into(), |s| gbit_per_sec(s.bytes_per_sec)),
                    gbit_per_sec(sum.bytes_per_sec),
                    retransmits.to_string(),
                ]);
                intervals.push(row);
            }
        }
        let mut header = vec!["interval s".to_string()];
        if directions.len() > 1 {
            header.push("direction".into());
        }
        header.extend(["sent Gbit/s", "received Gbit/s", "retransmits"].map(String::from));
        let numeric = (header.len() - 3..header.len()).collect();
        let summary = self.summarize(w);
        let headline = |role: &str| {
            summary[role]["bytes_per_sec"]
                .as_f64()
                .map_or("-".into(), format_bits_rate)
        };
        let mut title = format!(
            "{} stream{}{} to {}: sent {}, received {}",
            record.params["streams"],
            if record.params["streams"] == 1 {
                ""
            } else {
                "s"
            },
            if directions.len() > 1 {
                " each way"
            } else {
                ""
            },
            record.target,
            headline("send"),
            headline("receive"),
        );
        if let Some(share) = summary["share_of_goodput_limit"].as_f64() {
            title.push_str(&format!(
                " ({:.1}% of the link's goodput limit)",
                share * 100.0
            ));
        }
        let cpu = |side: &str| {
            summary["cpu"][side]
                .as_f64()
                .map_or("?".into(), |f| format!("{:.0}%", f * 100.0))
        };
        title.push_str(&format!(
            " · CPU of one core: local {}, remote {}",
            cpu("local_fraction"),
            cpu("remote_fraction")
        ));
        let streams = items
            .iter()
            .filter(|i| i.scope == Scope::Stream)
            .map(|i| {
                vec![
                    i.stream.map_or("-".into(), |s| s.to_string()),
                    i.direction.clone().unwrap_or_default(),
                    format!(
                        "{} {}",
                        if i.side == Side::Local {
                            "local"
                        } else {
                            "remote"
                        },
                        i.op
                    ),
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
        vec![
            Table {
                title,
                header,
                rows: intervals,
                numeric,
            },
            Table {
                title: "each stream end".into(),
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
                rows: streams,
                numeric: vec![0, 3, 4, 5, 6, 7, 8],
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(op: &str, scope: Scope, start_s: f64, end_s: f64, bytes: u64) -> NetItem {
        NetItem {
            direction: Some("up".into()),
            stream: Some(0),
            ..NetItem::moved(op, scope, Side::Local, start_s, end_s, bytes)
        }
    }

    #[test]
    fn totals_sum_streams_by_nominal_interval_and_drop_the_partial_one() {
        let mut items = vec![
            item("receive", Scope::Stream, 0.0, 2.1, 2100),
            item("receive", Scope::Stream, 0.0, 2.0, 2000),
        ];
        // Stream 1's first interval stalled to 1.6 s; its second is short but whole.
        let stream_intervals = [
            [(0, 0.0, 1.0, 1000), (1, 1.0, 2.0, 1000), (2, 2.0, 2.1, 100)],
            [(0, 0.0, 1.6, 1600), (1, 1.6, 2.0, 400), (2, 2.0, 2.0, 0)],
        ];
        for (stream, intervals) in stream_intervals.iter().enumerate() {
            for &(index, start, end, bytes) in intervals {
                let mut interval = item("receive", Scope::Interval, start, end, bytes);
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
