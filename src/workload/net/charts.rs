//! The net test's charts: each direction's rate per interval with every ceiling its
//! limit gives as a dashed line, and per stream the share of each interval its sender
//! spent busy, held by the receiver's window and held by its own send buffer.

use super::item::Heading;
use super::item::{NetItem, Scope};
use super::limit::Limit;
use super::report::Role;
use super::summary::{NetSummary, interval_sums};
use crate::vocab::chart::{Chart, Line, percent_axis};
use crate::vocab::units::format_bits_rate;

/// Streams drawn one by one in the chart of the senders' time; more are summed.
const STREAMS_DRAWN: usize = 3;

/// A ceiling this many times the top rate or more is named in the legend, not drawn:
/// drawn, it would flatten the rate to the chart's floor.
const FAR: f64 = 4.0;

/// The charts of a stored net test: for each direction with a limit, its rate against
/// its ceilings, and where its senders' time went.
pub fn charts(items: &[NetItem], summary: &NetSummary, nominal_s: f64) -> Vec<Chart> {
    let mut out = Vec::new();
    for (direction, limit) in summary.limits() {
        let named = |what: &str| match direction {
            Some(direction) => format!("{direction}: {what}"),
            None => what.to_string(),
        };
        out.extend(ceilings(items, direction, limit, nominal_s, &named));
        out.extend(sender_time(items, direction, &named));
    }
    out
}

/// The received rate per interval (the sent rate where no receiver kept intervals),
/// and each of the limit's ceilings across the test.
fn ceilings(
    items: &[NetItem],
    direction: Option<Heading>,
    limit: &Limit,
    nominal_s: f64,
    named: &dyn Fn(&str) -> String,
) -> Option<Chart> {
    let (role, sums) = [Role::Receive, Role::Send]
        .into_iter()
        .map(|role| (role, interval_sums(items, role, direction, nominal_s)))
        .find(|(_, sums)| !sums.is_empty())?;
    let points: Vec<(f64, f64)> = sums.iter().map(|s| (s.end_s, s.bytes_per_sec)).collect();
    let top = points.iter().map(|p| p.1).fold(0.0, f64::max);
    let (from, to) = (
        sums.first().map_or(0.0, |s| s.start_s),
        points.last().map_or(0.0, |p| p.0),
    );
    let mut lines = vec![Line {
        name: match role {
            Role::Receive => "received".into(),
            Role::Send => "sent".into(),
        },
        points,
        strong: true,
        ..Line::default()
    }];
    let drawn: Vec<_> = limit
        .ceilings
        .iter()
        .filter(|c| c.bytes_per_sec.is_finite() && c.bytes_per_sec > 0.0)
        .collect();
    for ceiling in &drawn {
        let far = ceiling.bytes_per_sec >= FAR * top;
        lines.push(Line {
            name: format!(
                "{} ceiling {}{}",
                ceiling.name.replace('_', " "),
                format_bits_rate(ceiling.bytes_per_sec),
                if far { " (above the chart)" } else { "" }
            ),
            points: if far {
                Vec::new()
            } else {
                vec![(from, ceiling.bytes_per_sec), (to, ceiling.bytes_per_sec)]
            },
            dashed: true,
            ..Line::default()
        });
    }
    let cause = limit.cause.map_or("cannot be told", |c| c.as_str());
    let chart = Chart::over_time(
        &named(&format!(
            "rate per interval and its ceilings (limit: {cause})"
        )),
        "seconds from the start",
        "rate",
        format_bits_rate,
        lines,
    );
    chart.has_points().then_some(chart)
}

/// Per stream (summed where there are many), the share of each interval its sender
/// was busy, held by the window and held by the send buffer, from its TCP account;
/// `None` where no sender kept one (an iperf3 sender, an old kernel).
fn sender_time(
    items: &[NetItem],
    direction: Option<Heading>,
    named: &dyn Fn(&str) -> String,
) -> Option<Chart> {
    let intervals: Vec<&NetItem> = items
        .iter()
        .filter(|i| i.scope == Scope::Interval && i.op == Role::Send)
        .filter(|i| direction.is_none_or(|d| i.direction == Some(d)))
        .filter(|i| i.busy_us.is_some() && i.seconds > 0.0)
        .collect();
    let mut streams: Vec<u32> = intervals.iter().filter_map(|i| i.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    if streams.is_empty() {
        return None;
    }
    let groups: Vec<(String, Vec<u32>)> = if streams.len() <= STREAMS_DRAWN {
        streams
            .iter()
            .map(|&s| (format!("stream {s} "), vec![s]))
            .collect()
    } else {
        vec![(format!("{} streams ", streams.len()), streams)]
    };
    let mut lines = Vec::new();
    for (label, members) in &groups {
        let of_group: Vec<&NetItem> = intervals
            .iter()
            .copied()
            .filter(|i| i.stream.is_some_and(|s| members.contains(&s)))
            .collect();
        for (what, field) in SHARES {
            lines.push(Line {
                name: format!("{label}{what}"),
                points: shares(&of_group, field),
                ..Line::default()
            });
        }
    }
    let mut chart = Chart::over_time(
        &named("where the senders' time went (TCP's account)"),
        "seconds from the start",
        "share of the interval",
        percent_axis,
        lines,
    );
    // Shares run from nothing to the whole interval, whatever the points.
    let from = intervals
        .iter()
        .map(|i| i.start_s)
        .fold(f64::INFINITY, f64::min);
    let to = intervals.iter().map(|i| i.end_s).fold(0.0, f64::max);
    chart.lines.push(Line {
        name: "the whole interval".into(),
        points: vec![(from, 1.0), (to, 1.0)],
        dashed: true,
        ..Line::default()
    });
    chart.has_points().then_some(chart)
}

/// A field of an interval's TCP account, microseconds.
type Microseconds = fn(&NetItem) -> Option<u64>;

/// The sender's account, by name: busy (data in flight), held by the receiver's
/// window, held by its own send buffer.
const SHARES: [(&str, Microseconds); 3] = [
    ("busy", |i| i.busy_us),
    ("held by the window", |i| i.rwnd_limited_us),
    ("held by the send buffer", |i| i.sndbuf_limited_us),
];

/// Per interval index, `field` summed over `intervals` as a share of their summed
/// length, at the interval's end.
fn shares(intervals: &[&NetItem], field: Microseconds) -> Vec<(f64, f64)> {
    let mut by_index: std::collections::BTreeMap<u64, (f64, f64, f64)> = Default::default();
    for interval in intervals {
        let entry = by_index
            .entry(interval.interval.unwrap_or(0))
            .or_insert((0.0, 0.0, 0.0));
        entry.0 = entry.0.max(interval.end_s);
        entry.1 += field(interval).unwrap_or(0) as f64 / 1e6;
        entry.2 += interval.seconds;
    }
    by_index
        .into_values()
        .filter(|(_, _, seconds)| *seconds > 0.0)
        .map(|(end, used, seconds)| (end, (used / seconds).min(1.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::net::item::{NetOp, Side};
    use crate::workload::net::limit::{Cause, Ceiling};

    fn interval(op: NetOp, stream: u32, index: u64, busy: u64, rwnd: u64) -> NetItem {
        let start = index as f64;
        let mut item = NetItem::moved(
            op,
            Scope::Interval,
            Side::Local,
            start,
            start + 1.0,
            1e6 as u64,
        );
        item.direction = Some(Heading::Up);
        item.stream = Some(stream);
        item.interval = Some(index);
        if op == NetOp::Send {
            item.busy_us = Some(busy);
            item.rwnd_limited_us = Some(rwnd);
            item.sndbuf_limited_us = Some(0);
        }
        item
    }

    #[test]
    fn the_rate_is_drawn_against_each_ceiling_and_each_stream_s_time_as_shares() {
        let mut items = Vec::new();
        for index in 0..3 {
            items.push(interval(NetOp::Send, 0, index, 1_000_000, 400_000));
            items.push(interval(NetOp::Receive, 0, index, 0, 0));
        }
        let summary = NetSummary {
            limit: Some(Limit {
                cause: Some(Cause::ReceiveWindow),
                at: "the receiver".into(),
                share: Some(0.4),
                evidence: String::new(),
                ceilings: vec![
                    Ceiling {
                        name: "receive_window".into(),
                        bytes_per_sec: 1.1e6,
                        set_by: String::new(),
                    },
                    Ceiling {
                        name: "wire".into(),
                        bytes_per_sec: 1.25e9,
                        set_by: String::new(),
                    },
                ],
                advice: None,
            }),
            ..NetSummary::default()
        };
        let charts = charts(&items, &summary, 1.0);
        assert_eq!(charts.len(), 2, "{charts:?}");
        let rate = &charts[0];
        assert!(
            rate.title.contains("limit: receive_window"),
            "{}",
            rate.title
        );
        assert_eq!(
            rate.lines[0].points,
            vec![(1.0, 1e6), (2.0, 1e6), (3.0, 1e6)]
        );
        assert!(rate.lines[1].dashed && rate.lines[1].name.starts_with("receive window"));
        // A wire a thousand times the rate is named, not drawn.
        let wire = rate
            .lines
            .iter()
            .find(|l| l.name.starts_with("wire"))
            .unwrap();
        assert!(wire.points.is_empty() && wire.name.ends_with("(above the chart)"));
        let time = &charts[1];
        let held = time
            .lines
            .iter()
            .find(|l| l.name == "stream 0 held by the window");
        assert_eq!(
            held.unwrap().points,
            vec![(1.0, 0.4), (2.0, 0.4), (3.0, 0.4)]
        );
        assert!(rate.svg().is_some() && time.svg().is_some());
    }
}
