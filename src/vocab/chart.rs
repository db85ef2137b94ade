//! A chart as a kind describes it: lines of points against named axes, with optional
//! min-max bars and fitted curves. The HTML report draws it; nothing here draws.

use super::units::format_size;

/// One line of a chart.
#[derive(Debug, Clone, Default)]
pub struct Line {
    /// Its name in the legend.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
    /// For each point, the (min, max) of y drawn as a bar; empty when none.
    pub ranges: Vec<(f64, f64)>,
    /// A curve drawn dashed over the x range (a fitted law), with its name.
    pub curve: Option<(String, Vec<(f64, f64)>)>,
    /// Whether it is the line the chart is about (the step that limits): drawn
    /// strongest, the others fainter.
    pub strong: bool,
    /// Whether it is a bound rather than a measurement (a ceiling): drawn dashed,
    /// without points.
    pub dashed: bool,
}

/// A stretch of the x axis one line's workload spent on one stage: marked where it
/// begins, named above the plot where its width leaves room.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The stage's name.
    pub label: String,
    /// Where it begins, in x.
    pub from: f64,
    /// Where it ends.
    pub to: f64,
    /// The index of the line it belongs to (its colour).
    pub line: usize,
}

/// What a chart shows and how its axes read.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The title, above the plot.
    pub title: String,
    /// The x axis's name with its unit.
    pub x_label: String,
    /// The y axis's name with its unit.
    pub y_label: String,
    /// Whether x is on a log scale (file sizes).
    pub x_log: bool,
    /// Whether y is on a log scale (latencies that span decades).
    pub y_log: bool,
    /// Formats an x value for the axis.
    pub x_format: fn(f64) -> String,
    /// Formats a y value for the axis.
    pub y_format: fn(f64) -> String,
    /// The lines.
    pub lines: Vec<Line>,
    /// The lines' stages, marked on the x axis; empty when none.
    pub spans: Vec<Span>,
    /// Names of the x axis's categories where it has them (steps, not a scale): each
    /// line is then drawn as a bar at each category its points' x indexes, side by
    /// side with the other lines' bars, its ranges as whiskers; empty for lines.
    pub categories: Vec<String>,
}

impl Chart {
    /// A chart of something against a count of threads or CPUs, on linear axes.
    pub fn counted(
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
            y_log: false,
            x_format: count_axis,
            y_format,
            lines,
            spans: Vec::new(),
            categories: Vec::new(),
        }
    }

    /// Bars of each line at each of `categories` (a point's x is its category's index),
    /// on a linear y axis from zero.
    pub fn bars(
        title: &str,
        y_label: &str,
        y_format: fn(f64) -> String,
        categories: Vec<String>,
        lines: Vec<Line>,
    ) -> Chart {
        Chart {
            x_format: plain_axis,
            categories,
            ..Chart::counted(title, "", y_label, y_format, lines)
        }
    }

    /// A chart of something against seconds, on linear axes.
    pub fn over_time(
        title: &str,
        x_label: &str,
        y_label: &str,
        y_format: fn(f64) -> String,
        lines: Vec<Line>,
    ) -> Chart {
        Chart {
            x_format: plain_axis,
            ..Chart::counted(title, x_label, y_label, y_format, lines)
        }
    }

    /// Whether any line has a point to draw.
    pub fn has_points(&self) -> bool {
        self.lines.iter().any(|l| !l.points.is_empty())
    }
}

/// `n` points spread evenly from `from` to `to`, for drawing a curve.
pub fn spread(from: f64, to: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| from + (to - from) * i as f64 / (n.max(2) - 1) as f64)
        .collect()
}

/// An axis label for a plain number: whole, or two decimals.
pub fn plain_axis(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// An axis label for a fraction, in percent.
pub fn percent_axis(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// An axis label for a frequency in Hz, in GHz.
pub fn ghz_axis(v: f64) -> String {
    format!("{:.2} GHz", v / 1e9)
}

/// Where a size in bytes sits on a size axis: its base-2 logarithm, so that the axis
/// is logarithmic and its whole marks fall on powers of two (1 KiB, 1 MiB).
pub fn size_x(bytes: u64) -> f64 {
    (bytes.max(1) as f64).log2()
}

/// An axis label for a size placed by [`size_x`], in the tables' binary units: `64 KiB`
/// at each even power of two, none between.
pub fn size_axis(x: f64) -> String {
    let whole = x.round();
    if (x - whole).abs() > 1e-6 || whole < 0.0 || whole as i64 % 2 != 0 {
        return String::new();
    }
    format_size(2f64.powf(whole) as u64)
}

/// Whether rates from `low` to `high` span enough decades (over 30x) that a log axis
/// shows the low ones at all.
pub fn spans_decades(rates: impl Iterator<Item = f64>) -> bool {
    let (low, high) = rates
        .filter(|r| r.is_finite() && *r > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
            (lo.min(r), hi.max(r))
        });
    high > 30.0 * low
}

/// An axis label for a count of threads or CPUs: whole ticks only, others unlabelled.
pub fn count_axis(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 && v >= 0.0 {
        format!("{v:.0}")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_sit_on_powers_of_two_in_binary_units() {
        assert_eq!(size_x(1 << 20), 20.0);
        assert_eq!(size_axis(size_x(1 << 20)), "1 MiB");
        assert_eq!(size_axis(16.0), "64 KiB");
        assert_eq!(size_axis(17.0), "", "odd powers are left unlabelled");
        assert_eq!(size_axis(16.5), "");
        assert!(spans_decades([3.0e7, 2.5e9].into_iter()));
        assert!(!spans_decades([1.0e9, 2.5e9, 0.0].into_iter()));
    }
}
