//! How ratelab summarises and shows a stored readdir run: rates by size band, since
//! the files of a real folder rarely share a size.

use crate::vocab::Exposure;
use serde::{Deserialize, Serialize};

use super::{ReaddirContext, ReaddirPlan};
use crate::document::{Flag, Severity, Verdict};
use crate::storage::item::DiskItem;
use crate::storage::rates::by_size_chart;
use crate::storage::rates::{Headline, link_limit};
use crate::storage::read::ReadMode;
use crate::vocab::units::{format_bytes, format_rate, mb_per_sec};
use crate::vocab::{Chart, GroupKey, LinkLimit, RateUnit, Samples, Table};
use crate::workload::{Kind, Stored};

/// Upper edges of the size bands, in the binary units sizes are shown in.
const BANDS: [u64; 5] = [100 << 10, 1 << 20, 10 << 20, 100 << 20, 1 << 30];

/// One size band's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// The band in words (`1.00 MiB to 10.0 MiB`).
    pub band: String,
    /// Smallest size in the band.
    pub from_bytes: u64,
    /// First size past the band; null for the last band.
    pub to_bytes: Option<u64>,
    /// Bytes read in the band.
    pub bytes: u64,
    /// Rates of its files.
    #[serde(flatten)]
    pub rates: Headline,
}

/// The bands of `items`, smallest first; empty bands are left out.
pub fn by_band(items: &[DiskItem], min_size: u64) -> Vec<Band> {
    let mut edges = vec![min_size];
    edges.extend(BANDS.iter().copied().filter(|&edge| edge > min_size));
    edges
        .iter()
        .enumerate()
        .filter_map(|(index, &from)| {
            let to = edges.get(index + 1).copied();
            let inside: Vec<&DiskItem> = items
                .iter()
                .filter(|i| i.size_bytes >= from && to.is_none_or(|to| i.size_bytes < to))
                .collect();
            let bytes = inside.iter().map(|i| i.bytes).sum();
            Some(Band {
                band: match to {
                    Some(to) => format!("{} to {}", format_bytes(from), format_bytes(to)),
                    None => format!("{} and up", format_bytes(from)),
                },
                from_bytes: from,
                to_bytes: to,
                bytes,
                rates: Headline::of(inside)?,
            })
        })
        .collect()
}

/// How ratelab summarises, judges and shows stored readdir workloads.
pub struct ReaddirKind;

/// A readdir workload's summary: every file's headline, and each size band's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaddirSummary {
    /// All files read; null when none was.
    pub read: Option<Headline>,
    /// The size bands, smallest first.
    pub by_band: Vec<Band>,
    /// Files read.
    pub files_read: usize,
    /// Files or folders that could not be read.
    pub unreadable: usize,
}

impl Kind for ReaddirKind {
    fn exposure(&self, _w: &Stored<Self>) -> Exposure {
        Exposure::STORAGE
    }

    const NAME: &'static str = "readdir";
    type Params = ReaddirPlan;
    type Context = ReaddirContext;
    type Item = DiskItem;
    type Summary = ReaddirSummary;

    fn summarize(&self, w: &Stored<Self>) -> ReaddirSummary {
        ReaddirSummary {
            read: Headline::of(&w.items),
            by_band: by_band(&w.items, w.params.min_size_bytes),
            files_read: w.items.len(),
            unreadable: w.record.warnings.len(),
        }
    }

    fn verdicts(&self, w: &Stored<Self>) -> Vec<Verdict> {
        let (record, items) = (w.record, &w.items);
        let verdict = Verdict::about(Some(w.index()));
        let mut out = Vec::new();
        if !record.warnings.is_empty() {
            out.push(verdict(
                "unreadable_files",
                Severity::Warning,
                format!(
                    "{} files or folders under {} could not be read and are left out (see the warnings)",
                    record.warnings.len(),
                    record.target
                ),
            ));
        }
        let cached = items
            .iter()
            .filter(|i| i.flags.contains(&Flag::Cached))
            .count();
        if cached > 0 {
            out.push(verdict(
                "not_evicted",
                Severity::Warning,
                format!(
                    "{cached} of {} files were mostly in the page cache before their read (pages not yet \
                     written back, or mapped by a program): their figures include cache hits",
                    items.len()
                ),
            ));
        }
        let flushed = items
            .iter()
            .filter(|i| i.mode == ReadMode::Flushed.as_str())
            .count();
        if flushed > 0 && w.params.read_mode == ReadMode::Direct {
            out.push(verdict(
                "direct_refused",
                Severity::Info,
                format!("{flushed} files were on a filesystem without O_DIRECT: they were evicted first and read through the cache"),
            ));
        }
        out
    }

    fn tables(&self, w: &Stored<Self>) -> Vec<Table> {
        let rows = by_band(&w.items, w.params.min_size_bytes)
            .into_iter()
            .map(|band| {
                let rates = band.rates.rates.as_ref();
                vec![
                    band.band,
                    rates.map_or(0, |r| r.n).to_string(),
                    format_bytes(band.bytes),
                    rates.map_or("-".into(), |r| mb_per_sec(r.median_bytes_per_sec)),
                    rates.map_or("-".into(), |r| mb_per_sec(r.min_bytes_per_sec)),
                    rates.map_or("-".into(), |r| mb_per_sec(r.max_bytes_per_sec)),
                    rates.map_or("-".into(), |r| mb_per_sec(r.aggregate_bytes_per_sec)),
                ]
            })
            .collect();
        let context = &w.context;
        vec![Table {
            title: format!(
                "files read uncached by size band ({} read, {} smaller than {} and {} not regular files skipped){}",
                w.items.len(),
                context.skipped_too_small,
                format_bytes(w.params.min_size_bytes),
                context.skipped_not_regular,
                context
                    .max_bytes_per_sec
                    .map(|l| format!(" · link limit {}", format_rate(l)))
                    .unwrap_or_default()
            ),
            header: [
                "size band",
                "files",
                "bytes",
                "median MB/s",
                "min MB/s",
                "max MB/s",
                "all bytes MB/s",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            numeric: vec![1, 2, 3, 4, 5, 6],
        }]
    }

    fn charts(&self, w: &Stored<Self>) -> Vec<Chart> {
        by_size_chart(&w.record.target, &w.items)
            .into_iter()
            .collect()
    }

    fn link_limit(&self, w: &Stored<Self>) -> Option<LinkLimit> {
        Some(link_limit(
            w.context.max_bytes_per_sec,
            w.context.chain.as_ref(),
        ))
    }

    /// Files by the size bands the run's summary holds (`summary.by_band`).
    fn samples(&self, w: &Stored<Self>) -> Option<Samples> {
        // The bands the table shows, not the stored summary's: a run stored with other
        // edges compares on today's.
        let bands: Vec<(u64, Option<u64>)> = by_band(&w.items, w.params.min_size_bytes)
            .iter()
            .map(|b| (b.from_bytes, b.to_bytes))
            .collect();
        let items = w
            .items
            .iter()
            .filter_map(|item| {
                let &(from, to) = bands.iter().find(|(from, to)| {
                    item.size_bytes >= *from && to.is_none_or(|to| item.size_bytes < to)
                })?;
                let key = GroupKey {
                    size_bytes: Some(from),
                    size_to_bytes: to,
                    banded: true,
                    ..GroupKey::new(RateUnit::BytesPerSec, "read")
                };
                // Every item, as the table's median takes it (see the disk kind).
                Some((key, Some(item.bytes_per_sec)))
            })
            .collect();
        Some(Samples { items })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::engine::Transfer;
    use crate::storage::item::Op;

    fn item(size: u64) -> DiskItem {
        let transfer = Transfer {
            elapsed: std::time::Duration::from_millis(10),
            bytes: size,
            data_wait: std::time::Duration::ZERO,
        };
        DiskItem::timed(Op::Read, "direct", transfer, 1, "f")
    }

    #[test]
    fn files_fall_in_their_bands() {
        let items = [
            item(10_000),
            item((100 << 10) - 1),
            item(100 << 10),
            item(5_000_000_000),
        ];
        let bands = by_band(&items, 10_000);
        let counts: Vec<(u64, usize)> = bands
            .iter()
            .map(|b| (b.from_bytes, b.rates.rates.as_ref().unwrap().n))
            .collect();
        assert_eq!(counts, vec![(10_000, 2), (100 << 10, 1), (1 << 30, 1)]);
        assert_eq!(bands[1].band, "100 KiB to 1.00 MiB");
        assert_eq!(bands.last().unwrap().to_bytes, None);
    }
}
