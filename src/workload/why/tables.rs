//! A `why` run as tables and charts: where the wall time went, step by step; what each
//! process of the tree did with its own threads' time; and, over time, each step's
//! share and each device's and interface's rate.

use super::measured::named;
use super::stored::{
    IntervalItem, Measured, ProcessItem, WhatIfStep, WhyContext, WhyItem, WhyPlan, WhySummary,
};
use crate::account::Step;
use crate::vocab::Table;
use crate::vocab::chart::{Chart, Line, percent_axis, plain_axis};
use crate::vocab::units::{format_bits_rate, format_rate, format_seconds};

/// Rows of the steps table before the rest are summed in one.
const STEP_ROWS: usize = 12;
/// Waits named per process (the JSON document has them all).
const WAITS_SHOWN: usize = 1;
/// Planned sampling intervals a command's span holds at least before the samples'
/// rate is said: over fewer, two samples of a 1 ms command read as 2000 a second.
const RATE_AFTER_INTERVALS: f64 = 5.0;

/// Where the wall time went, most first: each step's share of the sampled time, in
/// seconds of the command's wall time, so that the rows add up to the time the title
/// and the answer name (the sampled span starts after the command and ends after it).
pub fn steps(summary: &WhySummary, context: &WhyContext, plan: &WhyPlan, target: &str) -> Table {
    let wall = summary.command.wall_s;
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
            format_seconds(s.share * wall),
            format!("{:.1}%", s.share * 100.0),
            rate,
        ]);
    }
    let rest = &summary.steps[summary.steps.len().min(STEP_ROWS)..];
    if !rest.is_empty() {
        let share: f64 = rest.iter().map(|s| s.share).sum();
        rows.push(vec![
            format!("{} more", rest.len()),
            String::new(),
            format_seconds(share * wall),
            format!("{:.1}%", share * 100.0),
            "-".into(),
        ]);
    }
    let hz = match sample_rate(context, plan) {
        Some(rate) => format!(", {} samples ({rate:.0} a second)", context.samples),
        None if context.samples > 0 => format!(", {} samples", context.samples),
        None => String::new(),
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

/// What each measured what-if did to the command's time, beside the share the samples
/// gave the step; none where no what-if was measured.
pub fn what_ifs(summary: &WhySummary) -> Option<Table> {
    if summary.measured.is_empty() {
        return None;
    }
    let rows = summary
        .measured
        .iter()
        .map(|m| {
            let changed = if m.factor == 0.0 {
                "free".to_string()
            } else {
                format!("{:.0}× slower", m.factor)
            };
            let forward = if m.step == WhatIfStep::ReadsFree {
                "-".to_string()
            } else {
                format!("{:.2}×", m.speedup)
            };
            vec![
                m.step.name().to_string(),
                m.place.clone(),
                changed,
                format!("{:.2}× ({:.2}–{:.2})", m.ratio, m.ratio_min, m.ratio_max),
                m.rounds.to_string(),
                format!("{:.0}%", m.sampled_share * 100.0),
                format!("{:.2}", m.sensitivity),
                forward,
            ]
        })
        .collect();
    Some(Table {
        title:
            "what-ifs, measured: the command's time with the step changed over its time unchanged"
                .into(),
        header: [
            "step",
            "where",
            "changed",
            "time",
            "rounds",
            "sampled share",
            "sensitivity",
            "twice as fast",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        numeric: vec![3, 4, 5, 6, 7],
    })
}

/// Samples a second over the sampled span, where it holds several planned intervals:
/// the samples after the first over the span and one planned interval more, since the
/// last sample, taken as the command ends, falls between two of the plan's.
fn sample_rate(context: &WhyContext, plan: &WhyPlan) -> Option<f64> {
    let interval_s = 1.0 / plan.hz.max(f64::MIN_POSITIVE);
    (context.samples > 1 && context.sampled_s >= RATE_AFTER_INTERVALS * interval_s)
        .then(|| (context.samples - 1) as f64 / (context.sampled_s + interval_s))
}

/// What each process did with its own threads' time; processes of one name share a
/// row (68 `md5sum` of an `xargs` are one), which the JSON document keeps apart.
pub fn processes(items: &[WhyItem]) -> Option<Table> {
    let mut groups: Vec<Vec<&ProcessItem>> = Vec::new();
    for item in items {
        let WhyItem::Process(p) = item else {
            continue;
        };
        match groups.iter_mut().find(|g| g[0].name == p.name) {
            Some(group) => group.push(p),
            None => groups.push(vec![p]),
        }
    }
    let grouped = groups.iter().any(|g| g.len() > 1);
    let rows: Vec<Vec<String>> = groups.iter().map(|g| row(g)).collect();
    let mut title = "each process's threads, in thread-seconds (a wait on another process is charged above to what it did)".to_string();
    if grouped {
        title.push_str("; ×N: N processes of that name, their times summed");
    }
    (!rows.is_empty()).then(|| Table {
        title,
        header: ["pid", "process", "cpu", "cpu wait", "most waited on"]
            .map(String::from)
            .to_vec(),
        rows,
        numeric: vec![0, 2, 3],
    })
}

/// The row of the processes of one name: one process's own, or for several their
/// count, summed times, and the waits they spent most thread-seconds in together.
fn row(group: &[&ProcessItem]) -> Vec<String> {
    let mut waits: Vec<(&str, f64)> = Vec::new();
    for wait in group.iter().flat_map(|p| &p.waits) {
        match waits.iter_mut().find(|(what, _)| *what == wait.what) {
            Some((_, seconds)) => *seconds += wait.seconds,
            None => waits.push((&wait.what, wait.seconds)),
        }
    }
    let hidden = group.iter().filter(|p| !p.waits_readable).count();
    if hidden > 0 {
        // Said once, by the note below.
        waits.retain(|(what, _)| !what.ends_with("waits not readable"));
    }
    waits.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut shown: Vec<String> = waits
        .iter()
        .take(WAITS_SHOWN)
        .map(|(what, seconds)| format!("{what} {}", format_seconds(*seconds)))
        .collect();
    match (hidden, group.len()) {
        (0, _) => {}
        (_, 1) => shown.push("(its waits cannot be read as this user)".into()),
        (n, _) => shown.push(format!("(the waits of {n} cannot be read as this user)")),
    }
    let first = group[0];
    let threads: usize = group.iter().map(|p| p.threads.max(1)).sum();
    let name = if threads > group.len() {
        format!("{} ({threads} threads)", first.name)
    } else {
        first.name.clone()
    };
    vec![
        match group.len() {
            1 => first.pid.to_string(),
            n => format!("×{n}"),
        },
        name,
        format_seconds(group.iter().map(|p| p.cpu_s).sum()),
        format_seconds(group.iter().map(|p| p.cpu_wait_s).sum()),
        if shown.is_empty() {
            "-".into()
        } else {
            shown.join("; ")
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

/// Each step a what-if changed: the share of the wall time the samples gave it beside
/// the share of the command's time that moved with it, measured (its rounds' range as
/// a whisker).
pub fn what_ifs_chart(measured: &[Measured]) -> Option<Chart> {
    if measured.is_empty() {
        return None;
    }
    let at = |figure: fn(&Measured) -> f64| -> Vec<(f64, f64)> {
        measured
            .iter()
            .enumerate()
            .map(|(i, m)| (i as f64, figure(m)))
            .collect()
    };
    Some(Chart::bars(
        "what-ifs: each step's sampled share beside its measured sensitivity",
        "share of the command's time",
        percent_axis,
        measured.iter().map(named).collect(),
        vec![
            Line {
                name: "sampled share".into(),
                points: at(|m| m.sampled_share),
                ..Line::default()
            },
            Line {
                name: "sensitivity, measured".into(),
                points: at(|m| m.sensitivity),
                ranges: measured
                    .iter()
                    .map(|m| (m.sensitivity_min, m.sensitivity_max))
                    .collect(),
                ..Line::default()
            },
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::why::answer::summarize;

    fn items(json: serde_json::Value) -> Vec<WhyItem> {
        serde_json::from_value(json).unwrap()
    }

    fn plan(hz: f64) -> WhyPlan {
        serde_json::from_value(serde_json::json!({"command": ["false"], "pid": null,
            "seconds": null, "hz": hz, "interval_s": 0.1}))
        .unwrap()
    }

    #[test]
    fn a_short_command_s_rows_add_up_to_its_wall_time_and_say_no_rate() {
        // The sampler read 816 µs, from after the command started to after it ended.
        let context = WhyContext {
            argv: vec!["false".into()],
            wall_s: Some(533e-6),
            sampled_s: 816e-6,
            samples: 2,
            ..WhyContext::default()
        };
        let items = items(
            serde_json::json!([{"op": "step", "step": "cpu", "where": "false",
            "device": null, "interface": null, "peer": null, "seconds": 816e-6,
            "active_seconds": 0.0, "bytes": 0}]),
        );
        let table = steps(
            &summarize(&context, &items),
            &context,
            &plan(100.0),
            "false",
        );
        assert_eq!(table.title, "where the 533 µs of `false` went, 2 samples");
        assert_eq!(table.rows[0][2..4], ["533 µs", "100.0%"]);
        // --hz 1000 over 2.4 ms holds fewer than five of its intervals: no rate either.
        let table = steps(
            &summarize(&context, &items),
            &context,
            &plan(1000.0),
            "false",
        );
        assert!(!table.title.contains("a second"), "{}", table.title);
    }

    #[test]
    fn a_long_command_s_rate_is_never_past_its_plan() {
        // The last sample, as the command ended, fell between two of the plan's.
        let context = WhyContext {
            wall_s: Some(0.506),
            sampled_s: 0.502,
            samples: 52,
            ..WhyContext::default()
        };
        let table = steps(
            &summarize(&context, &[]),
            &context,
            &plan(100.0),
            "sleep 0.5",
        );
        assert_eq!(
            table.title,
            "where the 506 ms of `sleep 0.5` went, 52 samples (100 a second)"
        );
    }

    #[test]
    fn processes_of_one_name_share_a_row() {
        let process = |pid: u32, name: &str, cpu_s: f64, waits: serde_json::Value| {
            serde_json::json!({"op": "process", "pid": pid, "ppid": 1, "name": name,
                "threads": 1, "cpu_s": cpu_s, "cpu_wait_s": 0.001, "waits": waits,
                "cpu_by_thread": [], "waits_readable": true})
        };
        let wait = |what: &str, seconds: f64| serde_json::json!({"what": what, "step": null, "seconds": seconds});
        let items = items(serde_json::json!([
            process(
                10,
                "xargs",
                0.01,
                serde_json::json!([wait("its children", 2.0)])
            ),
            process(
                11,
                "md5sum",
                0.5,
                serde_json::json!([wait("a pipe's reader", 0.2), wait("disk_read vda", 0.1)])
            ),
            process(
                12,
                "md5sum",
                0.25,
                serde_json::json!([wait("disk_read vda", 0.15)])
            ),
            process(13, "md5sum", 0.25, serde_json::json!([])),
        ]));
        let table = processes(&items).unwrap();
        assert_eq!(table.rows.len(), 2, "{:?}", table.rows);
        assert_eq!(table.rows[0][..2], ["10", "xargs"]);
        assert_eq!(
            table.rows[1],
            ["×3", "md5sum", "1.00 s", "3.00 ms", "disk_read vda 250 ms"]
        );
        assert!(table.title.contains("×N: N processes"), "{}", table.title);
    }
}
