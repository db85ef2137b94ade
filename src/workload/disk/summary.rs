//! The storage series' summary: its headline figures per operation and read mode, and
//! its rates by size (the statistics themselves are the storage core's).

use super::ReadMode;
use super::stored::DiskSummary;
use crate::storage::item::{DiskItem, Op};
use crate::storage::rates::{Headline, by_size};

/// The disk summary (docs/json.md): `write`, `read` (the first read mode),
/// `read_<mode>` for each mode, and `by_size`. Figures faster than the link are never a
/// headline speed.
pub fn summarize(items: &[DiskItem], read_modes: &[ReadMode]) -> DiskSummary {
    let reads_in =
        |mode: &str| Headline::of(items.iter().filter(|i| i.op == Op::Read && i.mode == mode));
    let mut reads = indexmap::IndexMap::new();
    if let Some(first) = read_modes.first() {
        reads.insert("read".to_string(), reads_in(first.as_str()));
    }
    for mode in read_modes {
        reads.insert(format!("read_{}", mode.as_str()), reads_in(mode.as_str()));
    }
    DiskSummary {
        write: Headline::of(items.iter().filter(|i| i.op == Op::Write)),
        rewrite: Headline::of(items.iter().filter(|i| i.op == Op::Rewrite)),
        reads,
        by_size: by_size(items),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::item::tests::item;
    use crate::storage::rates::flagged;

    #[test]
    fn summary_has_spec_fields() {
        let items = vec![
            item(Op::Write, "fsync", 1 << 20, 100e6, None),
            item(Op::Write, "fsync", 1 << 20, 300e6, None),
            item(Op::Write, "fsync", 1 << 20, 200e6, None),
            item(Op::Read, "direct", 1 << 20, 400e6, Some(0.0)),
        ];
        let summary = serde_json::to_value(summarize(&items, &[ReadMode::Direct])).unwrap();
        assert_eq!(summary["write"]["median_bytes_per_sec"], 200e6);
        assert_eq!(summary["write"]["min_bytes_per_sec"], 100e6);
        assert_eq!(summary["write"]["max_bytes_per_sec"], 300e6);
        assert_eq!(summary["write"]["n"], 3);
        assert_eq!(summary["read"]["n"], 1);
        assert_eq!(summary["read_direct"]["n"], 1);
        assert_eq!(summary["write"]["excluded_faster_than_link"], 0);
    }

    #[test]
    fn figures_faster_than_the_link_are_not_headline_speeds() {
        let items: Vec<DiskItem> = [1e8, 2e8, 9e9]
            .into_iter()
            .map(|rate| {
                flagged(
                    item(Op::Read, "direct", 1 << 20, rate, Some(0.0)),
                    Some(6e8),
                )
            })
            .collect();
        let summary = serde_json::to_value(summarize(&items, &[ReadMode::Direct])).unwrap();
        assert_eq!(summary["read"]["n"], 2);
        assert_eq!(summary["read"]["max_bytes_per_sec"], 2e8);
        assert_eq!(summary["read"]["excluded_faster_than_link"], 1);
        let all_cache = serde_json::to_value(summarize(&items[2..], &[ReadMode::Direct])).unwrap();
        assert_eq!(all_cache["read"]["excluded_faster_than_link"], 1);
        assert!(all_cache["read"].get("median_bytes_per_sec").is_none());
    }
}
