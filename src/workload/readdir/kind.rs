//! What a stored readdir workload is made of (its params, context, items and summary)
//! and how a run concludes its summary; how it is judged and shown is in view.rs.

use serde::{Deserialize, Serialize};

use super::{ReaddirContext, ReaddirPlan};
use crate::storage::item::DiskItem;
use crate::storage::rates::Headline;
use crate::vocab::units::format_bytes;
use crate::workload::{Decoded, Kind, Stored};

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

/// The readdir kind: its stored shapes and what a run concludes from them.
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
    const NAME: &'static str = "readdir";
    type Params = ReaddirPlan;
    type Context = ReaddirContext;
    type Item = DiskItem;
    type Summary = ReaddirSummary;

    fn summarize(w: &Stored<Self>, _run: &Decoded) -> ReaddirSummary {
        ReaddirSummary {
            read: Headline::of(&w.items),
            by_band: by_band(&w.items, w.params.min_size_bytes),
            files_read: w.items.len(),
            unreadable: w.record.warnings.len(),
        }
    }
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
