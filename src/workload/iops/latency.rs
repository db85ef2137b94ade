//! Latency of block requests: a histogram per thread (hdrhistogram, three
//! significant digits, 1 ns to an hour), merged per test, its percentiles as users
//! read them (as fio's lat), and the histogram itself stored compactly (hdrhistogram's
//! V2 encoding in base64) so that a stored run's percentiles can be computed again.

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use serde::{Deserialize, Serialize};

/// The longest latency a histogram holds: an hour; longer ones count as an hour.
const HIGHEST_NS: u64 = 3_600_000_000_000;

/// Completion latencies of one thread or one test.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

/// A test's latency figures, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// The mean.
    pub mean: f64,
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The 99.9th percentile.
    pub p99_9: u64,
    /// The 99.99th percentile.
    pub p99_99: u64,
    /// The longest.
    pub max: u64,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Latency {
        Latency(
            Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("the bounds are valid constants"),
        )
    }

    /// Counts one request that took `latency`.
    pub fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(HIGHEST_NS);
        self.0.saturating_record(ns.clamp(1, HIGHEST_NS));
    }

    /// Adds another thread's counts.
    pub fn merge(&mut self, other: &Latency) {
        self.0
            .add(&other.0)
            .expect("histograms of the same bounds add up");
    }

    /// Requests counted.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The figures users read; `None` when nothing was counted.
    pub fn figures(&self) -> Option<LatencyFigures> {
        let h = &self.0;
        (!h.is_empty()).then(|| LatencyFigures {
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p99_9: h.value_at_quantile(0.999),
            p99_99: h.value_at_quantile(0.9999),
            max: h.max(),
        })
    }

    /// The histogram as stored: V2-encoded, in base64.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.0, &mut bytes)
            .expect("a histogram encodes into memory");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A stored histogram; says what is wrong with one that cannot be read.
    pub fn decode(text: &str) -> Result<Latency, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("not base64: {e}"))?;
        let histogram: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("not an hdrhistogram: {e:?}"))?;
        Ok(Latency(histogram))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_those_of_the_counts_within_three_digits() {
        let mut one = Latency::new();
        let mut other = Latency::new();
        // 1..=10000 microseconds, split over two threads.
        for us in 1..=10_000u64 {
            let into = if us % 2 == 0 { &mut one } else { &mut other };
            into.record(Duration::from_micros(us));
        }
        one.merge(&other);
        let figures = one.figures().unwrap();
        let near = |got: u64, want: u64| (got as f64 / want as f64 - 1.0).abs() < 1e-3;
        assert!(near(figures.p50, 5_000_000), "{figures:?}");
        assert!(near(figures.p90, 9_000_000), "{figures:?}");
        assert!(near(figures.p99, 9_900_000), "{figures:?}");
        assert!(near(figures.max, 10_000_000), "{figures:?}");
        assert!((figures.mean / 5_000_500.0 - 1.0).abs() < 1e-3);
        assert_eq!(one.count(), 10_000);
    }

    #[test]
    fn a_stored_histogram_gives_the_same_figures() {
        let mut latency = Latency::new();
        for ns in [900, 1_000, 35_000, 35_500, 2_000_000] {
            latency.record(Duration::from_nanos(ns));
        }
        let text = latency.encode();
        let back = Latency::decode(&text).unwrap();
        assert_eq!(back.figures(), latency.figures());
        assert!(Latency::decode("not a histogram").is_err());
        assert!(Latency::new().figures().is_none());
    }
}
