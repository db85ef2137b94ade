//! The monitor's charts: active residency per core over time, and the frequency where
//! the machine reports it.

use crate::vocab::chart::{Chart, Line, ghz_axis, percent_axis};

use super::MonitorItem;

/// The monitor's active residency per core over time, and the frequency where the
/// machine reports it.
pub fn charts(items: &[MonitorItem]) -> Vec<Chart> {
    let mut residency: Vec<Line> = Vec::new();
    let mut frequency: Vec<Line> = Vec::new();
    for item in items {
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
    let chart = |title: &str, y_label: &str, y_format: fn(f64) -> String, lines: Vec<Line>| {
        Chart::over_time(
            title,
            "seconds from the monitor's start",
            y_label,
            y_format,
            lines,
        )
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
