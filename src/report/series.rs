//! A rate series in one line of text: a sparkline of the rate over time, with its
//! scale and any knees, so a run's shape shows in a terminal.

use crate::document::Series;
use crate::vocab::RateUnit;
use crate::vocab::units::format_seconds;

/// Marks from low to high.
const MARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Widest sparkline, in marks.
const WIDTH: usize = 60;
/// Columns the line fits in, caption and marks, where the output is wider or has no
/// width of its own.
const LINE: usize = 80;
/// Fewest marks a line is narrowed to.
const FEWEST: usize = 16;

/// "rate over 12.3 s (0.2 s per mark, top 1.20 GB/s): ▁▃▇▇▇▆▃", and the knees, in
/// `unit`; `None` for a run too short to have a shape, or one that moves no bytes (cpu
/// tests).
pub fn describe(series: &Series, unit: RateUnit) -> Option<String> {
    if series.bytes.iter().all(|&b| b == 0) {
        return None;
    }
    let mut rates = series.bytes_per_sec();
    // A last sample cut short by the end of the run says little and can spike.
    let last = series
        .t_s
        .len()
        .checked_sub(2)
        .map(|i| series.t_s[i])
        .unwrap_or(series.started_at_s);
    if series
        .t_s
        .last()
        .is_some_and(|&end| end - last < series.interval_s / 2.0)
    {
        rates.pop();
    }
    if rates.len() < 2 {
        return None;
    }
    let span = series.t_s.last().copied().unwrap_or(0.0) - series.started_at_s;
    // Fewer, wider marks until the line fits the terminal, or marks would say little.
    let mut per_mark = rates.len().div_ceil(WIDTH);
    let fits = super::terminal::stdout_width().map_or(LINE, |w| w.min(LINE));
    loop {
        let (text, marks) = line(&rates, per_mark, span, series.interval_s, unit);
        let width = text.chars().count();
        if width <= fits || marks <= FEWEST || per_mark >= rates.len() {
            return Some(with_knees(text, series, unit));
        }
        per_mark += 1;
    }
}

/// The sparkline of `rates` at `per_mark` samples per mark, with its caption, and how
/// many marks it has.
fn line(
    rates: &[f64],
    per_mark: usize,
    span: f64,
    interval_s: f64,
    unit: RateUnit,
) -> (String, usize) {
    let marks: Vec<f64> = rates
        .chunks(per_mark)
        .map(|chunk| chunk.iter().sum::<f64>() / chunk.len() as f64)
        .collect();
    let top = marks.iter().copied().fold(0.0, f64::max);
    let line: String = marks
        .iter()
        .map(|&rate| {
            let level = if top > 0.0 {
                (rate / top * 7.0).round() as usize
            } else {
                0
            };
            MARKS[level.min(7)]
        })
        .collect();
    let text = format!(
        "rate over {} ({} per mark, top {}): {line}",
        format_seconds(span),
        format_seconds(interval_s * per_mark as f64),
        unit.format(top)
    );
    (text, marks.len())
}

/// `text` and a line for each knee of `series`.
fn with_knees(mut text: String, series: &Series, unit: RateUnit) -> String {
    for knee in series.knees.iter().flatten() {
        text.push_str(&format!(
            "\nknee at {}: {} → {} after {}",
            format_seconds(knee.t_s),
            unit.format(knee.before_bytes_per_sec),
            unit.format(knee.after_bytes_per_sec),
            crate::vocab::units::format_bytes(knee.bytes_before)
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_down_shows() {
        let series = Series {
            interval_s: 0.1,
            clock_unix_s: 0.0,
            started_at_s: 0.0,
            finished_at_s: Some(0.4),
            t_s: vec![0.1, 0.2, 0.3, 0.4],
            bytes: vec![100, 100, 25, 25],
            ops: vec![],
            knees: None,
            stages: Vec::new(),
        };
        let text = describe(&series, RateUnit::BytesPerSec).unwrap();
        assert!(text.ends_with("██▃▃"), "{text}");
        assert!(text.contains("top 1.00 kB/s"), "{text}");
        let bits = describe(&series, RateUnit::BytesPerSecInBits).unwrap();
        assert!(bits.contains("top 8.00 kbit/s"), "{bits}");
    }
}
