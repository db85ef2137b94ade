//! Which charts a stored run gets, and their figures: storage rate against file size,
//! the rate series of workloads that ran together, rates against threads or CPUs with
//! the fitted law, and the monitor's residency and frequency per core. Everything is
//! read from the run document, as stored.

use serde_json::Value;

use crate::analysis::disk::by_size;
use crate::analysis::fits::{LawParams, ScalingFits};
use crate::document::WorkloadRecord;
use crate::vocab::chart::{
    Chart, Line, count_axis, ghz_axis, percent_axis, plain_axis, size_axis, spread,
};
use crate::vocab::units::format_rate;
use crate::workload::disk::item::items_of as disk_items;
use crate::workload::monitor::{MonitorItem, items_of as monitor_items};

/// Points on a fitted curve.
const CURVE_POINTS: usize = 40;

/// The storage series: median rate per file size, with the min-max range, per
/// operation and mode.
pub fn disk(record: &WorkloadRecord) -> Option<Chart> {
    let rows = by_size(&disk_items(record));
    let mut lines: Vec<Line> = Vec::new();
    for row in rows {
        let name = format!("{} ({})", row.op.as_str(), row.mode);
        let line = match lines.iter_mut().find(|l| l.name == name) {
            Some(line) => line,
            None => {
                lines.push(Line {
                    name,
                    ..Line::default()
                });
                lines.last_mut().expect("just pushed")
            }
        };
        line.points
            .push((row.size_bytes as f64, row.rates.median_bytes_per_sec));
        line.ranges
            .push((row.rates.min_bytes_per_sec, row.rates.max_bytes_per_sec));
    }
    Some(Chart {
        title: format!("{}: rate by file size (median, min-max)", record.target),
        x_label: "file size".into(),
        y_label: "rate".into(),
        x_log: true,
        x_format: size_axis,
        y_format: format_rate,
        lines,
    })
    .filter(|c| !c.lines.is_empty())
}

/// The rate series of workloads that started together, on their common clock.
pub fn series(records: &[(usize, &WorkloadRecord)]) -> Option<Chart> {
    let lines: Vec<Line> = records
        .iter()
        .filter_map(|(index, record)| {
            let series = record.series.as_ref()?;
            let rates = series.bytes_per_sec();
            let points: Vec<(f64, f64)> = series.t_s.iter().copied().zip(rates).collect();
            (points.iter().any(|p| p.1 > 0.0)).then(|| Line {
                name: format!("{} {}: {}", record.kind, index + 1, record.target),
                points,
                ..Line::default()
            })
        })
        .collect();
    Some(Chart {
        title: if lines.len() > 1 {
            "rate over time, on one clock".into()
        } else {
            "rate over time".into()
        },
        x_label: "seconds from the common start".into(),
        y_label: "rate".into(),
        x_log: false,
        x_format: plain_axis,
        y_format: format_rate,
        lines,
    })
    .filter(|c| !c.lines.is_empty())
}

/// The curve of the best fitted law of `fits`, scaled by `scale`, from n = 1 to `to`.
fn fitted(fits: &Value, scale: f64, to: f64) -> Option<(String, Vec<(f64, f64)>)> {
    let fits: ScalingFits = serde_json::from_value(fits.clone()).ok()?;
    best_curve(&fits, scale, to)
}

fn best_curve(fits: &ScalingFits, scale: f64, to: f64) -> Option<(String, Vec<(f64, f64)>)> {
    let best = fits.best()?;
    let law: &LawParams = &best.params;
    let points = spread(1.0, to, CURVE_POINTS)
        .into_iter()
        .map(|n| (n, law.evaluate(n) * scale))
        .collect();
    Some((
        format!("{} fit (R² {:.3})", law.law().name(), best.r2),
        points,
    ))
}

/// Rates against threads or CPUs: cpu tests as speedup over one thread, a task's whole
/// rate and its steps, a scaled command's speedup; each with its fitted law.
pub fn by_count(record: &WorkloadRecord) -> Option<Chart> {
    let chart = match record.kind.as_str() {
        "cpu" => cpu(&record.summary)?,
        "task" => task(&record.summary)?,
        "scale" => scale(&record.summary, &record.target)?,
        _ => return None,
    };
    Some(chart).filter(|c| c.lines.iter().any(|l| !l.points.is_empty()))
}

/// A chart of something against a count (threads, CPUs).
fn counted(
    title: &str,
    x_label: &str,
    y_label: &str,
    y_format: fn(f64) -> String,
    lines: Vec<Line>,
) -> Chart {
    Chart {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        x_log: false,
        x_format: count_axis,
        y_format,
        lines,
    }
}

fn cpu(summary: &Value) -> Option<Chart> {
    let lines = summary["scaling"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            let points: Vec<(f64, f64)> = s["points"]
                .as_array()?
                .iter()
                .filter_map(|p| Some((p["threads"].as_f64()?, p["speedup"].as_f64()?)))
                .collect();
            let first_rate = s["points"][0]["loops_per_sec"].as_f64()?;
            let to = points.last()?.0;
            Some(Line {
                name: format!("{} ({})", s["test"].as_str()?, s["class"].as_str()?),
                curve: fitted(&s["fits"], 1.0 / first_rate, to),
                points,
                ranges: Vec::new(),
            })
        })
        .collect();
    Some(counted(
        "cpu tests: speedup over the first thread count",
        "threads",
        "speedup",
        plain_axis,
        lines,
    ))
}

fn task(summary: &Value) -> Option<Chart> {
    let per = summary["per_threads"].as_array()?;
    let step = |op: &str| -> Vec<(f64, f64)> {
        per.iter()
            .filter_map(|p| {
                let rate =
                    p["steps"].as_array()?.iter().find(|s| s["op"] == op)?["source_bytes_per_sec"]
                        .as_f64()?;
                Some((p["threads"].as_f64()?, rate))
            })
            .collect()
    };
    let to = per.last()?["threads"].as_f64()?;
    let mut lines = vec![Line {
        name: "whole task".into(),
        curve: fitted(summary, 1.0, to),
        points: step("total"),
        ranges: Vec::new(),
    }];
    for op in ["read", "compress", "decompress", "write"] {
        let points = step(op);
        if !points.is_empty() {
            lines.push(Line {
                name: format!("{op} alone"),
                points,
                ..Line::default()
            });
        }
    }
    Some(counted(
        "task: rate of original bytes by thread count",
        "compression threads",
        "original bytes per second",
        format_rate,
        lines,
    ))
}

fn scale(summary: &Value, target: &str) -> Option<Chart> {
    let points: Vec<(f64, f64)> = summary["points"]
        .as_array()?
        .iter()
        .filter_map(|p| Some((p["cpus"].as_f64()?, p["speedup"].as_f64()?)))
        .collect();
    // The fits are of runs per second; a speedup is that over the first count's.
    let first = summary["points"][0]["seconds"].as_f64()?;
    let to = points.last()?.0;
    let lines = vec![Line {
        name: target.to_string(),
        curve: fitted(summary, first, to),
        points,
        ranges: Vec::new(),
    }];
    Some(counted(
        "command: speedup by CPUs",
        "CPUs",
        "speedup",
        plain_axis,
        lines,
    ))
}

/// The monitor's active residency per core over time, and the frequency where the
/// machine reports it.
pub fn monitor(record: &WorkloadRecord) -> Vec<Chart> {
    if record.kind != "monitor" {
        return Vec::new();
    }
    let items = monitor_items(record);
    let mut residency: Vec<Line> = Vec::new();
    let mut frequency: Vec<Line> = Vec::new();
    for item in &items {
        let MonitorItem::Core {
            t_s,
            cpu,
            active_fraction,
            freq_hz,
            ..
        } = item
        else {
            continue;
        };
        let name = format!("cpu {cpu}");
        for (lines, value) in [
            (&mut residency, *active_fraction),
            (&mut frequency, *freq_hz),
        ] {
            let Some(value) = value else { continue };
            match lines.iter_mut().find(|l| l.name == name) {
                Some(line) => line.points.push((*t_s, value)),
                None => lines.push(Line {
                    name: name.clone(),
                    points: vec![(*t_s, value)],
                    ..Line::default()
                }),
            }
        }
    }
    let chart = |title: &str, y_label: &str, y_format: fn(f64) -> String, lines: Vec<Line>| Chart {
        title: title.into(),
        x_label: "seconds from the monitor's start".into(),
        y_label: y_label.into(),
        x_log: false,
        x_format: plain_axis,
        y_format,
        lines,
    };
    let mut out = vec![chart(
        "active residency per core",
        "active",
        percent_axis,
        residency,
    )];
    if !frequency.is_empty() {
        out.push(chart(
            "frequency per core",
            "frequency",
            ghz_axis,
            frequency,
        ));
    }
    out.into_iter().filter(|c| !c.lines.is_empty()).collect()
}
