//! Knees: the times where a rate series changes level for good (an SLC cache filling,
//! a thermal or link throttle). Binary segmentation of the series into constant levels
//! by least squares; a split stands only if both sides are long enough and their medians
//! differ by a real share, so one slow sample or a file boundary is not a knee.

use crate::document::{Knee, Series};

/// Fewest samples on each side of a knee.
const MIN_SAMPLES: usize = 5;
/// Smallest change of level, as a share of the higher one.
const MIN_CHANGE: f64 = 0.15;
/// Most knees reported.
const MAX_KNEES: usize = 8;

/// The knees of a series, in time order.
pub fn detect(series: &Series) -> Vec<Knee> {
    let rates = series.bytes_per_sec();
    // The last sample is cut short by the end of the run: leave it out.
    let rates = &rates[..rates.len().saturating_sub(1)];
    let mut splits = Vec::new();
    split(rates, 0, &mut splits);
    splits.sort_unstable();
    splits.truncate(MAX_KNEES);
    let mut bounds = vec![0];
    bounds.extend(&splits);
    bounds.push(rates.len());
    splits
        .iter()
        .enumerate()
        .map(|(index, &at)| Knee {
            t_s: series.t_s[at - 1],
            bytes_before: series.bytes[..at].iter().sum(),
            before_bytes_per_sec: median(&rates[bounds[index]..at]),
            after_bytes_per_sec: median(&rates[at..bounds[index + 2]]),
        })
        .collect()
}

/// Finds the best split of `rates` (which starts at `offset` in the series) and, if it
/// stands, records it and looks for more on each side.
fn split(rates: &[f64], offset: usize, found: &mut Vec<usize>) {
    if rates.len() < 2 * MIN_SAMPLES || found.len() >= MAX_KNEES {
        return;
    }
    let Some(at) = best_split(rates) else {
        return;
    };
    let (before, after) = (median(&rates[..at]), median(&rates[at..]));
    let change = (before - after).abs() / before.max(after).max(f64::MIN_POSITIVE);
    if change < MIN_CHANGE {
        return;
    }
    found.push(offset + at);
    split(&rates[..at], offset, found);
    split(&rates[at..], offset + at, found);
}

/// The split point that best explains `rates` as two constant levels (least squares),
/// with at least `MIN_SAMPLES` on each side.
fn best_split(rates: &[f64]) -> Option<usize> {
    let n = rates.len();
    let mut sums = vec![0.0; n + 1];
    let mut squares = vec![0.0; n + 1];
    for (i, &rate) in rates.iter().enumerate() {
        sums[i + 1] = sums[i] + rate;
        squares[i + 1] = squares[i] + rate * rate;
    }
    // Sum of squared deviations from the mean over rates[a..b].
    let cost = |a: usize, b: usize| {
        let count = (b - a) as f64;
        let sum = sums[b] - sums[a];
        (squares[b] - squares[a]) - sum * sum / count
    };
    (MIN_SAMPLES..=n - MIN_SAMPLES)
        .min_by(|&a, &b| (cost(0, a) + cost(a, n)).total_cmp(&(cost(0, b) + cost(b, n))))
}

fn median(values: &[f64]) -> f64 {
    crate::analysis::stats::Stats::of(values).map_or(0.0, |s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of `levels` (rate, samples) at 0.1 s, with a little noise.
    fn stepped(levels: &[(f64, usize)]) -> Series {
        let mut t_s = Vec::new();
        let mut bytes = Vec::new();
        let mut t = 0.0;
        let mut wobble = 1.0;
        for &(rate, samples) in levels {
            for _ in 0..samples {
                t += 0.1;
                wobble = if wobble > 1.0 { 0.97 } else { 1.03 };
                t_s.push(t);
                bytes.push((rate * 0.1 * wobble) as u64);
            }
        }
        t_s.push(t + 0.05);
        bytes.push(1);
        Series {
            interval_s: 0.1,
            clock_unix_s: 0.0,
            started_at_s: 0.0,
            finished_at_s: Some(t + 0.05),
            t_s,
            bytes,
            ops: vec![],
            knees: vec![],
        }
    }

    #[test]
    fn one_step_gives_one_knee_where_it_happened() {
        let series = stepped(&[(400e6, 30), (100e6, 40)]);
        let knees = detect(&series);
        assert_eq!(knees.len(), 1, "{knees:?}");
        assert!((knees[0].t_s - 3.0).abs() < 0.1 + 1e-9, "{knees:?}");
        assert!((knees[0].before_bytes_per_sec / 400e6 - 1.0).abs() < 0.05);
        assert!((knees[0].after_bytes_per_sec / 100e6 - 1.0).abs() < 0.05);
        assert!((knees[0].bytes_before as f64 / 1.2e9 - 1.0).abs() < 0.02);
    }

    #[test]
    fn a_flat_series_and_a_lone_dip_have_none() {
        assert!(detect(&stepped(&[(300e6, 60)])).is_empty());
        assert!(detect(&stepped(&[(300e6, 30), (50e6, 1), (300e6, 30)])).is_empty());
    }

    #[test]
    fn two_steps_give_two_knees_in_order() {
        let knees = detect(&stepped(&[(900e6, 20), (400e6, 20), (100e6, 20)]));
        let times: Vec<f64> = knees
            .iter()
            .map(|k| (k.t_s * 10.0).round() / 10.0)
            .collect();
        assert_eq!(times, vec![2.0, 4.0]);
    }
}
