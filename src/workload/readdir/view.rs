//! How ratelab summarises and shows a stored readdir run: rates by size band, since
//! the files of a real folder rarely share a size.

use super::kind::{ReaddirKind, by_band};
use crate::document::{Flag, Severity, Verdict};
use crate::storage::rates::by_size_chart;
use crate::storage::rates::link_limit;
use crate::storage::read::ReadMode;
use crate::vocab::Exposure;
use crate::vocab::units::{format_bytes, format_rate, mb_per_sec};
use crate::vocab::{Chart, GroupKey, LinkLimit, RateUnit, Samples, Table};
use crate::workload::{DecodeError, Decoded, Stored, View};

impl View for Stored<'_, ReaddirKind> {
    fn exposure(&self) -> Exposure {
        Exposure::STORAGE
    }

    fn verdicts(&self, _run: &Decoded) -> Result<Vec<Verdict>, DecodeError> {
        let (record, items) = (self.record, &self.items);
        let verdict = Verdict::about(Some(self.index()));
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
        if flushed > 0 && self.params.read_mode == ReadMode::Direct {
            out.push(verdict(
                "direct_refused",
                Severity::Info,
                format!("{flushed} files were on a filesystem without O_DIRECT: they were evicted first and read through the cache"),
            ));
        }
        Ok(out)
    }

    fn tables(&self) -> Vec<Table> {
        let rows = by_band(&self.items, self.params.min_size_bytes)
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
        let context = &self.context;
        vec![Table {
            title: format!(
                "files read uncached by size band ({} read, {} smaller than {} and {} not regular files skipped){}",
                self.items.len(),
                context.skipped_too_small,
                format_bytes(self.params.min_size_bytes),
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

    fn charts(&self) -> Vec<Chart> {
        by_size_chart(&self.record.target, &self.items)
            .into_iter()
            .collect()
    }

    fn link_limit(&self) -> Option<LinkLimit> {
        Some(link_limit(
            self.context.max_bytes_per_sec,
            self.context.chain.as_ref(),
        ))
    }

    /// Files by the size bands the run's summary holds (`summary.by_band`).
    fn samples(&self) -> Option<Samples> {
        // The bands the table shows, not the stored summary's: a run stored with other
        // edges compares on today's.
        let bands: Vec<(u64, Option<u64>)> = by_band(&self.items, self.params.min_size_bytes)
            .iter()
            .map(|b| (b.from_bytes, b.to_bytes))
            .collect();
        let items = self
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
