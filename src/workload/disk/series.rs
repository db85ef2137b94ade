//! The sizes of a series and the order each pass visits them in.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

/// `count` sizes drawn uniformly from `min..=max` with `seed`.
pub fn random_sizes(count: usize, min: u64, max: u64, seed: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_5153);
    (0..count).map(|_| rng.random_range(min..=max)).collect()
}

/// The order pass `pass` (from 1) visits `items` in: a new shuffle per pass and stage,
/// reproducible from `seed`.
pub fn shuffled<T: Clone>(items: &[T], seed: u64, pass: u32, stage: u32) -> Vec<T> {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(pass) << 32) ^ u64::from(stage));
    let mut order = items.to_vec();
    order.shuffle(&mut rng);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_sizes_stay_in_range_and_repeat_with_the_seed() {
        let sizes = random_sizes(100, 2 << 20, 2 << 30, 9);
        assert!(sizes.iter().all(|&s| (2 << 20..=2 << 30).contains(&s)));
        assert_eq!(sizes, random_sizes(100, 2 << 20, 2 << 30, 9));
    }

    #[test]
    fn each_pass_has_its_own_order() {
        let sizes: Vec<u64> = (1..=14).collect();
        let first = shuffled(&sizes, 1, 1, 0);
        let second = shuffled(&sizes, 1, 2, 0);
        assert_ne!(first, second);
        let mut sorted = first.clone();
        sorted.sort();
        assert_eq!(sorted, sizes);
    }
}
