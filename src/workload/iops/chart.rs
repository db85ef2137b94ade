//! The latency percentile chart: each test's latency (log scale) against its percentile,
//! on a scale of nines (90%, 99%, 99.9% evenly apart), from the stored histograms, as
//! latency tails are read.

use super::latency::Latency;
use super::stored::IopsItem;
use crate::vocab::chart::{Chart, Line};
use crate::vocab::units::format_latency;

/// The percentiles drawn, as fractions; each only where the test counted enough requests
/// for it to be more than its slowest one.
const QUANTILES: [f64; 11] = [
    0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999,
];

/// Latency against percentile for every item whose histogram can be read.
pub fn percentile_chart<'a>(items: impl IntoIterator<Item = &'a IopsItem>) -> Chart {
    let lines = items
        .into_iter()
        .filter_map(|item| {
            let latency = Latency::decode(&item.histogram).ok()?;
            let points = QUANTILES
                .iter()
                .filter(|&&q| latency.count() as f64 * (1.0 - q) >= 1.0)
                .map(|&q| (nines(q), latency.at_quantile(q) as f64))
                .collect();
            Some(Line {
                name: format!("{} {}", item.test, item.op_words()),
                points,
                ..Line::default()
            })
        })
        .collect();
    Chart {
        title: "latency by percentile".into(),
        x_label: "percentile".into(),
        y_label: "latency".into(),
        x_log: false,
        y_log: true,
        x_format: percentile_axis,
        y_format: format_latency,
        lines,
        spans: Vec::new(),
        categories: Vec::new(),
    }
}

/// A quantile on the scale of nines: 0.9 is 1, 0.99 is 2, 0.999 is 3.
fn nines(quantile: f64) -> f64 {
    -(1.0 - quantile).log10()
}

/// An axis label on the scale of nines: `90%`, `99.9%` at whole nines, none between.
fn percentile_axis(x: f64) -> String {
    if (x - x.round()).abs() > 1e-6 || x < 0.0 {
        return String::new();
    }
    let percent = 100.0 * (1.0 - 10f64.powf(-x.round()));
    let decimals = (x.round() as usize).saturating_sub(2);
    format!("{percent:.decimals$}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nines_read_as_percentiles() {
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert_eq!(percentile_axis(0.0), "0%");
        assert_eq!(percentile_axis(1.0), "90%");
        assert_eq!(percentile_axis(2.0), "99%");
        assert_eq!(percentile_axis(3.0), "99.9%");
        assert_eq!(percentile_axis(4.0), "99.99%");
        assert_eq!(percentile_axis(2.5), "");
    }
}
