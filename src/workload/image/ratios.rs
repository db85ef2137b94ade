//! A place's rates against the host folder's, operation by operation: each file paired
//! with the host's file of the same size in the same round (they ran minutes apart,
//! interleaved), the median of the pairs' ratios with a distribution-free confidence
//! interval (the sign test's), and a Mann-Whitney test of the two samples scaled by
//! the host's median at each size.

use std::collections::BTreeMap;

use super::stored::{OpRatio, PlaceOp};
use crate::analysis::mann_whitney;
use crate::analysis::stats::Stats;
use crate::document::Flag;
use crate::storage::item::DiskItem;

/// Files at least this large show the streaming rate a big transfer sees.
const LARGE_BYTES: u64 = 64 << 20;
/// Fewest pairs for a 95% interval: with 5, even all five on one side of the median
/// happen by chance 1 time in 16.
const MIN_PAIRS: usize = 6;

/// Items whose figure is the storage's: not a cache's, and long enough to time.
fn timed(item: &DiskItem) -> bool {
    !item
        .flags
        .iter()
        .any(|f| matches!(f, Flag::Small | Flag::FasterThanLink | Flag::Cached))
}

/// The place's operations, each against the host's, in the order the place ran them.
pub fn op_ratios(host: &[DiskItem], place: &[DiskItem]) -> Vec<OpRatio> {
    let mut ops: Vec<PlaceOp> = Vec::new();
    for op in place.iter().filter_map(PlaceOp::of) {
        if !ops.contains(&op) {
            ops.push(op);
        }
    }
    ops.into_iter()
        .map(|op| {
            let of = |items: &[DiskItem]| -> Vec<DiskItem> {
                items
                    .iter()
                    .filter(|i| PlaceOp::of(i) == Some(op) && timed(i))
                    .cloned()
                    .collect()
            };
            ratio_of(op, &of(host), &of(place))
        })
        .collect()
}

/// One operation's figures: the place's large-file median and its ratios to the host.
fn ratio_of(op: PlaceOp, host: &[DiskItem], place: &[DiskItem]) -> OpRatio {
    // Files of 64 MiB and more, or the largest there are.
    let floor = place
        .iter()
        .map(|i| i.size_bytes)
        .max()
        .map_or(0, |largest| largest.min(LARGE_BYTES));
    let large: Vec<f64> = place
        .iter()
        .filter(|i| i.size_bytes >= floor)
        .map(|i| i.bytes_per_sec)
        .collect();
    let median = Stats::of(&large).map(|s| s.median);
    let by_key: BTreeMap<(u64, u32), f64> = host
        .iter()
        .map(|i| ((i.size_bytes, i.pass), i.bytes_per_sec))
        .collect();
    let mut ratios: Vec<f64> = place
        .iter()
        .filter_map(|i| {
            let host = by_key.get(&(i.size_bytes, i.pass))?;
            (*host > 0.0).then(|| i.bytes_per_sec / host)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let (low, high) = sign_interval(&ratios).unzip();
    OpRatio {
        op,
        median_bytes_per_sec: median,
        ratio: Stats::of(&ratios).map(|s| s.median),
        ratio_low: low,
        ratio_high: high,
        pairs: ratios.len(),
        p_value: scaled_test(host, place),
    }
}

/// The 95% confidence interval of the median of sorted `values` by the sign test: the
/// k-th smallest and k-th largest, for the largest k that keeps the chance of the
/// median falling outside at most 5%. `None` below [`MIN_PAIRS`] values.
pub fn sign_interval(sorted: &[f64]) -> Option<(f64, f64)> {
    let n = sorted.len();
    if n < MIN_PAIRS {
        return None;
    }
    // Two-sided tail: 2 * P(Binomial(n, 1/2) <= k - 1) <= 0.05.
    let mut k = 0;
    let mut tail = 0.0;
    for below in 0..n {
        tail += binomial(n, below) * 0.5f64.powi(n as i32);
        if 2.0 * tail > 0.05 {
            break;
        }
        k = below + 1;
    }
    let k = k.max(1);
    Some((sorted[k - 1], sorted[n - k]))
}

/// n choose k, as a float (n is a count of files: small).
fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Mann-Whitney p of the place's rates against the host's, each divided by the host's
/// median at its file size, so that sizes of very different rates pool fairly.
fn scaled_test(host: &[DiskItem], place: &[DiskItem]) -> Option<f64> {
    let mut by_size: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for item in host {
        by_size
            .entry(item.size_bytes)
            .or_default()
            .push(item.bytes_per_sec);
    }
    let medians: BTreeMap<u64, f64> = by_size
        .into_iter()
        .filter_map(|(size, rates)| Some((size, Stats::of(&rates)?.median)))
        .filter(|(_, median)| *median > 0.0)
        .collect();
    let scale = |items: &[DiskItem]| -> Vec<f64> {
        items
            .iter()
            .filter_map(|i| Some(i.bytes_per_sec / medians.get(&i.size_bytes)?))
            .collect()
    };
    mann_whitney::test(&scale(place), &scale(host)).map(|t| t.p_value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::item::DiskItem;
    use crate::storage::item::Op;

    fn item(op: Op, size: u64, pass: u32, rate: f64) -> DiskItem {
        DiskItem {
            op,
            mode: if op == Op::Read { "direct" } else { "fsync" }.into(),
            size_bytes: size,
            bytes: size,
            seconds: size as f64 / rate,
            bytes_per_sec: rate,
            cached_fraction_before: None,
            layers: vec![],
            read_below_fraction: None,
            flags: vec![],
            direct: false,
            pass,
            file: "f".into(),
            files: None,
            data_wait_fraction: None,
        }
    }

    #[test]
    fn the_sign_interval_widens_with_fewer_values_and_needs_six() {
        let values: Vec<f64> = (1..=14).map(f64::from).collect();
        // n = 14: 2 P(B <= 2) = 0.013, 2 P(B <= 3) = 0.057, so the 3rd from each end.
        assert_eq!(sign_interval(&values), Some((3.0, 12.0)));
        assert_eq!(sign_interval(&values[..6]), Some((1.0, 6.0)));
        assert_eq!(sign_interval(&values[..5]), None);
    }

    #[test]
    fn a_place_at_half_the_host_rate_shows_a_ratio_of_one_half_beyond_noise() {
        let sizes = [1u64 << 20, 10 << 20, 100 << 20];
        let mut host = Vec::new();
        let mut place = Vec::new();
        for pass in 1..=3 {
            for (n, &size) in sizes.iter().enumerate() {
                let rate = 100e6 * (n + 1) as f64 + f64::from(pass);
                host.push(item(Op::Write, size, pass, rate));
                place.push(item(Op::Write, size, pass, rate / 2.0));
            }
        }
        let ratios = op_ratios(&host, &place);
        assert_eq!(ratios.len(), 1);
        let write = &ratios[0];
        assert_eq!(write.op, PlaceOp::Write);
        assert_eq!(write.pairs, 9);
        assert!((write.ratio.unwrap() - 0.5).abs() < 1e-9);
        assert!((write.ratio_low.unwrap() - 0.5).abs() < 1e-9);
        assert!(write.p_value.unwrap() < 0.01, "{write:?}");
        // The place's large files: 100 MiB at 150 MB/s and a little.
        assert!((write.median_bytes_per_sec.unwrap() - 150e6).abs() < 1e3);
    }
}
