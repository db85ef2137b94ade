//! Knees: the times where a rate series changes level for good (an SLC cache filling,
//! a thermal or link throttle). Binary segmentation of the series into constant levels
//! by least squares; a split stands only if both sides last long enough, their medians
//! differ by a real share, and by much more than the noise around them (a robust
//! standard error from the median absolute deviation), so one slow sample, a file
//! boundary or a noisy flat run is not a knee.

use crate::catch::{Family, skew};
use crate::document::{Knee, Series};

/// Fewest samples on each side of a knee.
const MIN_SAMPLES: usize = 5;
/// Shortest level on each side of a knee, in seconds.
const MIN_LEVEL_S: f64 = 0.5;
/// How many standard errors apart two levels must be: high, because the split is the
/// best of many tried.
const MIN_Z: f64 = 5.0;
/// Smallest change of level, as a share of the higher one.
const MIN_CHANGE: f64 = 0.15;
/// Most knees reported.
const MAX_KNEES: usize = 8;

/// The knees of a series, in time order.
pub fn detect(series: &Series) -> Vec<Knee> {
    let rates = series.bytes_per_sec();
    // The last sample is cut short by the end of the run: leave it out.
    let rates = &rates[..rates.len().saturating_sub(1)];
    let min_samples = MIN_SAMPLES.max((MIN_LEVEL_S / series.interval_s.max(1e-6)).ceil() as usize);
    let mut splits = Vec::new();
    split(rates, 0, min_samples, &mut splits);
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

/// `knees` of a series of `family`'s figures, their rates as [`skew`] reports them.
pub fn skewed(knees: Vec<Knee>, family: Family) -> Vec<Knee> {
    knees
        .into_iter()
        .map(|k| Knee {
            before_bytes_per_sec: skew(family, k.before_bytes_per_sec),
            after_bytes_per_sec: skew(family, k.after_bytes_per_sec),
            ..k
        })
        .collect()
}

/// Finds the best split of `rates` (which starts at `offset` in the series) and, if it
/// stands, records it and looks for more on each side.
fn split(rates: &[f64], offset: usize, min_samples: usize, found: &mut Vec<usize>) {
    if rates.len() < 2 * min_samples || found.len() >= MAX_KNEES {
        return;
    }
    let Some(at) = best_split(rates, min_samples) else {
        return;
    };
    let (left, right) = (&rates[..at], &rates[at..]);
    let (before, after) = (median(left), median(right));
    let change = (before - after).abs() / before.max(after).max(f64::MIN_POSITIVE);
    let sigma = pooled_sigma(left, before, right, after);
    let noise = 1.2533 * sigma * (1.0 / left.len() as f64 + 1.0 / right.len() as f64).sqrt();
    if change < MIN_CHANGE || (before - after).abs() < MIN_Z * noise {
        return;
    }
    found.push(offset + at);
    split(left, offset, min_samples, found);
    split(right, offset + at, min_samples, found);
}

/// The noise around two levels, as one robust standard deviation: 1.4826 times the
/// median absolute deviation of every sample from its own side's median. Pooled, so a
/// short side does not look quiet by chance; the standard error of a side's median is
/// then 1.2533 σ / √n.
fn pooled_sigma(left: &[f64], before: f64, right: &[f64], after: f64) -> f64 {
    let deviations: Vec<f64> = left
        .iter()
        .map(|v| (v - before).abs())
        .chain(right.iter().map(|v| (v - after).abs()))
        .collect();
    1.4826 * median(&deviations)
}

/// The split point that best explains `rates` as two constant levels (least squares),
/// with at least `min_samples` on each side.
fn best_split(rates: &[f64], min_samples: usize) -> Option<usize> {
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
    (min_samples..=n - min_samples)
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
            knees: None,
            stages: Vec::new(),
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
    fn noisy_flat_runs_have_none() {
        // Flat rates with 30% noise, many seeds: none may show a knee.
        for seed in 1..200u64 {
            let mut state = seed;
            let mut noise = || {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            };
            let mut series = stepped(&[(300e6, 120)]);
            for bytes in series.bytes.iter_mut() {
                *bytes = (*bytes as f64 * (1.0 + 0.52 * noise())) as u64;
            }
            assert!(
                detect(&series).is_empty(),
                "seed {seed}: {:?}",
                detect(&series)
            );
        }
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
