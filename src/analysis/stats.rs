//! Order statistics for figures that are not normally distributed: median and range
//! first, the mean only beside them.

use serde::{Deserialize, Serialize};

/// Median, range, mean and count of a set of figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The middle value (mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// How many values.
    pub n: usize,
}

impl Stats {
    /// Statistics of `values`; `None` when there are none. NaN values are ignored.
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Stats {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            mean: sorted.iter().sum::<f64>() / n as f64,
            n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn odd_and_even_counts() {
        let odd = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max, odd.n), (2.0, 1.0, 3.0, 3));
        let even = Stats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert_eq!(even.mean, 2.5);
    }

    #[test]
    fn empty_has_no_stats() {
        assert!(Stats::of(&[]).is_none());
        assert!(Stats::of(&[f64::NAN]).is_none());
    }

    proptest! {
        #[test]
        fn median_lies_within_range(values in prop::collection::vec(0.0f64..1e12, 1..50)) {
            let stats = Stats::of(&values).unwrap();
            prop_assert!(stats.min <= stats.median && stats.median <= stats.max);
            prop_assert!(stats.min <= stats.mean * (1.0 + 1e-12) && stats.mean <= stats.max * (1.0 + 1e-12));
            prop_assert_eq!(stats.n, values.len());
        }
    }
}
