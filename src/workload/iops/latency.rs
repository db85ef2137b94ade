//! Latency of block requests: a histogram per thread (hdrhistogram, three
//! significant digits, 1 ns to an hour), merged per test, its percentiles as users
//! read them (as fio's lat), and the histogram itself stored compactly (hdrhistogram's
//! V2 encoding in base64) so that a stored run's percentiles can be computed again.

use std::sync::Mutex;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use serde::{Deserialize, Serialize};

use crate::catch::{Family, skew};

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

    /// The latency at `quantile` (0.99 for the 99th percentile), in nanoseconds.
    pub fn at_quantile(&self, quantile: f64) -> u64 {
        self.0.value_at_quantile(quantile)
    }

    /// Forgets every count, keeping the histogram's memory.
    pub fn reset(&mut self) {
        self.0.reset();
    }

    /// The figures users read; `None` when nothing was counted.
    pub fn figures(&self) -> Option<LatencyFigures> {
        let h = &self.0;
        let ns = |value: u64| skew(Family::Latency, value as f64).round() as u64;
        (!h.is_empty()).then(|| LatencyFigures {
            mean: skew(Family::Latency, h.mean()),
            p50: ns(h.value_at_quantile(0.50)),
            p90: ns(h.value_at_quantile(0.90)),
            p99: ns(h.value_at_quantile(0.99)),
            p99_9: ns(h.value_at_quantile(0.999)),
            p99_99: ns(h.value_at_quantile(0.9999)),
            max: ns(h.max()),
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

/// One interval of a test: requests completed and their latency, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct IntervalFigures {
    /// Requests completed in it.
    pub ios: u64,
    /// Their median latency; `None` when none completed.
    pub p50_ns: Option<u64>,
    /// Their 99th percentile.
    pub p99_ns: Option<u64>,
}

/// A test's counted span cut into equal intervals, each with the latencies every thread
/// counted in it: the test's figures are theirs added up, and `results compare` sets
/// one run's intervals against another's.
#[derive(Debug)]
pub struct Intervals {
    length: Duration,
    count: usize,
    slots: Mutex<Vec<Option<Latency>>>,
}

impl Intervals {
    /// Intervals about half a second long, 10 to 60 of them, over `span`.
    pub fn over(span: Duration) -> Intervals {
        let count = (span.as_secs_f64() / 0.5).round().clamp(10.0, 60.0) as u32;
        Intervals {
            length: span / count,
            count: count as usize,
            slots: Mutex::new(vec![None; count as usize]),
        }
    }

    /// Each interval's length.
    pub fn length(&self) -> Duration {
        self.length
    }

    /// The interval a request that completed `since` the span began falls in.
    pub fn index(&self, since: Duration) -> usize {
        ((since.as_nanos() / self.length.as_nanos().max(1)) as usize).min(self.count - 1)
    }

    /// Adds a thread's counts of interval `index`.
    pub fn add(&self, index: usize, latency: &Latency) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots[index].get_or_insert_with(Latency::new).merge(latency);
    }

    /// The whole span's latencies, and each interval's figures.
    pub fn into_figures(self) -> (Latency, Vec<IntervalFigures>) {
        let slots = self.slots.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut whole = Latency::new();
        let figures = slots
            .iter()
            .map(|slot| match slot {
                Some(latency) => {
                    whole.merge(latency);
                    IntervalFigures {
                        ios: latency.count(),
                        p50_ns: Some(latency.0.value_at_quantile(0.50)),
                        p99_ns: Some(latency.0.value_at_quantile(0.99)),
                    }
                }
                None => IntervalFigures {
                    ios: 0,
                    p50_ns: None,
                    p99_ns: None,
                },
            })
            .collect();
        (whole, figures)
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

    #[test]
    fn intervals_add_up_to_the_whole_span() {
        let intervals = Intervals::over(Duration::from_secs(5));
        assert_eq!(intervals.length(), Duration::from_millis(500));
        assert_eq!(intervals.index(Duration::from_millis(499)), 0);
        assert_eq!(intervals.index(Duration::from_millis(500)), 1);
        assert_eq!(
            intervals.index(Duration::from_secs(9)),
            9,
            "the last takes the rest"
        );
        let mut thread = Latency::new();
        thread.record(Duration::from_micros(100));
        thread.record(Duration::from_micros(300));
        intervals.add(0, &thread);
        intervals.add(0, &thread);
        intervals.add(3, &thread);
        let (whole, figures) = intervals.into_figures();
        assert_eq!(whole.count(), 6);
        assert_eq!(figures.len(), 10);
        assert_eq!(figures[0].ios, 4);
        assert_eq!(figures[1].ios, 0);
        assert_eq!(figures[1].p99_ns, None);
        assert!(figures[3].p99_ns.unwrap() >= 299_000);
        assert_eq!(
            Intervals::over(Duration::from_secs(60)).length(),
            Duration::from_secs(1)
        );
        assert_eq!(
            Intervals::over(Duration::from_secs(2)).length(),
            Duration::from_millis(200)
        );
    }
}
