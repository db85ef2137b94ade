//! A `why` run as tables and charts: where the wall time went, step by step; what each
//! process of the tree did with its own threads' time; and, over time, each step's
//! share and each device's and interface's rate.

use super::stored::{IntervalItem, ProcessItem, WhyContext, WhyItem, WhySummary};
use crate::account::Step;
use crate::vocab::Table;
use crate::vocab::chart::{Chart, Line, percent_axis, plain_axis};
use crate::vocab::units::{format_bits_rate, format_rate, format_seconds};

/// Rows of the steps table before the rest are summed in one.
const STEP_ROWS: usize = 12;
/// Waits named per process (the JSON document has them all).
const WAITS_SHOWN: usize = 1;

/// Where the wall time went, most first.
pub fn steps(summary: &WhySummary, context: &WhyContext, target: &str) -> Table {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in summary.steps.iter().take(STEP_ROWS) {
        let rate = s.bytes_per_sec.map_or("-".into(), |r| {
            if s.step.on_link() {
                format_bits_rate(r)
            } else {
                format_rate(r)
            }
        });
        rows.push(vec![
            s.step.name().to_string(),
            s.place.clone(),
            format_seconds(s.seconds),
            format!("{:.1}%", s.share * 100.0),
            rate,
        ]);
    }
    let rest = &summary.steps[summary.steps.len().min(STEP_ROWS)..];
    if !rest.is_empty() {
        let seconds: f64 = rest.iter().map(|s| s.seconds).sum();
        let share: f64 = rest.iter().map(|s| s.share).sum();
        rows.push(vec![
            format!("{} more", rest.len()),
            String::new(),
            format_seconds(seconds),
            format!("{:.1}%", share * 100.0),
            "-".into(),
        ]);
    }
    let hz = if context.sampled_s > 0.0 {
        format!(
            ", {} samples ({:.0} a second)",
            context.samples,
            context.samples as f64 / context.sampled_s
        )
    } else {
        String::new()
    };
    Table {
        title: format!(
            "where the {} of `{target}` went{hz}",
            format_seconds(summary.command.wall_s)
        ),
        header: ["step", "where", "seconds", "share", "rate"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![2, 3, 4],
    }
}

/// What each process did with its own threads' time.
pub fn processes(items: &[WhyItem]) -> Option<Table> {
    let rows: Vec<Vec<String>> = items
        .iter()
        .filter_map(|i| match i {
            WhyItem::Process(p) => Some(row(p)),
            _ => None,
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        title: "each process's threads, in thread-seconds (a wait on another process is charged above to what it did)".into(),
        header: ["pid", "process", "cpu", "cpu wait", "most waited on"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![0, 2, 3],
    })
}

fn row(p: &ProcessItem) -> Vec<String> {
    let mut waits: Vec<String> = p
        .waits
        .iter()
        .take(WAITS_SHOWN)
        .map(|w| format!("{} {}", w.what, format_seconds(w.seconds)))
        .collect();
    if !p.waits_readable {
        waits.push("(its waits cannot be read as this user)".into());
    }
    let name = match p.threads {
        0 | 1 => p.name.clone(),
        n => format!("{} ({n} threads)", p.name),
    };
    vec![
        p.pid.to_string(),
        name,
        format_seconds(p.cpu_s),
        format_seconds(p.cpu_wait_s),
        if waits.is_empty() {
            "-".into()
        } else {
            waits.join("; ")
        },
    ]
}

/// Each step's share of the wall time over time, and the rate of each device and
/// interface the command waited on.
pub fn charts(items: &[WhyItem]) -> Vec<Chart> {
    let intervals: Vec<&IntervalItem> = items
        .iter()
        .filter_map(|i| match i {
            WhyItem::Interval(b) => Some(b),
            _ => None,
        })
        .collect();
    let mut shares: Vec<Line> = Vec::new();
    for step in Step::ALL {
        let points: Vec<(f64, f64)> = intervals
            .iter()
            .filter(|b| b.seconds > 0.0)
            .map(|b| {
                let seconds: f64 = b
                    .steps
                    .iter()
                    .filter(|(s, _)| *s == step)
                    .map(|(_, s)| s)
                    .sum();
                (b.t_s, seconds / b.seconds)
            })
            .collect();
        if points.iter().any(|(_, y)| *y > 0.0) {
            shares.push(Line {
                name: step.name().into(),
                points,
                ..Line::default()
            });
        }
    }
    let mut rates: Vec<Line> = Vec::new();
    for b in intervals.iter().filter(|b| b.seconds > 0.0) {
        for m in &b.moved {
            for (way, bytes) in [
                (if m.interface { "received" } else { "read" }, m.read_bytes),
                (
                    if m.interface { "sent" } else { "written" },
                    m.written_bytes,
                ),
            ] {
                let name = format!("{} {way}", m.name);
                let point = (b.t_s, bytes as f64 / b.seconds / 1e6);
                match rates.iter_mut().find(|l| l.name == name) {
                    Some(line) => line.points.push(point),
                    None => rates.push(Line {
                        name,
                        points: vec![point],
                        ..Line::default()
                    }),
                }
            }
        }
    }
    rates.retain(|l| l.points.iter().any(|(_, y)| *y > 0.0));
    let chart = |title: &str, y_label: &str, y_format: fn(f64) -> String, lines: Vec<Line>| {
        Chart::over_time(
            title,
            "seconds from the command's start",
            y_label,
            y_format,
            lines,
        )
    };
    let mut out = vec![chart(
        "each step's share of the wall time",
        "share",
        percent_axis,
        shares,
    )];
    out.push(chart(
        "devices and interfaces the command waited on",
        "MB/s",
        plain_axis,
        rates,
    ));
    out.into_iter().filter(Chart::has_points).collect()
}
