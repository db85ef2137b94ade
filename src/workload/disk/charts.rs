//! The storage series' chart: median rate per file size with the min-max range, per
//! operation and mode.

use super::item::DiskItem;
use super::summary::by_size;
use crate::vocab::chart::{Chart, Line, size_axis};
use crate::vocab::units::format_rate;

/// The files of `target`: median rate per file size, with the min-max range, per
/// operation and mode.
pub fn by_size_chart(target: &str, items: &[DiskItem]) -> Option<Chart> {
    let rows = by_size(items);
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
        title: format!("{}: rate by file size (median, min-max)", target),
        x_label: "file size".into(),
        y_label: "rate".into(),
        x_log: true,
        x_format: size_axis,
        y_format: format_rate,
        lines,
    })
    .filter(|c| !c.lines.is_empty())
}
