//! A storage series at a glance: its line of the run's summary (large files written
//! and read, small files, the link's limit), its one brief table (a row per size, each
//! operation's median and range side by side, 80 columns wide), and the link limit it
//! could not find.

use super::DiskKind;
use crate::analysis::stats::Stats;
use crate::document::Flag;
use crate::storage::item::{DiskItem, Op};
use crate::storage::rates::{RateSummary, SizeRow, by_size};
use crate::vocab::units::{format_rate, format_size};
use crate::vocab::{SummaryLine, Table, Unmeasured};
use crate::workload::Stored;

/// Files at least this large show the streaming rate a big transfer sees.
const LARGE_BYTES: u64 = 64 << 20;

/// The operations of a series in the order shown: the write, then each read mode.
fn columns(w: &Stored<DiskKind>) -> Vec<(Op, String)> {
    let mut out: Vec<(Op, String)> = Vec::new();
    for item in &w.items {
        let key = (item.op, item.mode.clone());
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out.sort_by_key(|(op, _)| *op);
    out
}

/// An operation in words: `write`, `read uncached`, `read through the page cache`.
fn words(op: Op, mode: &str) -> String {
    match (op, mode) {
        (Op::Write, _) => "write".into(),
        (Op::Rewrite, _) => "rewrite in place".into(),
        (Op::Read, "direct") => "read uncached".into(),
        (Op::Read, "flushed") => "read evicted".into(),
        (Op::Read, "cached") => "read from the page cache".into(),
        (Op::Read, mode) => format!("read {mode}"),
    }
}

/// The median rate of `op` in `mode` over files of `from` bytes or more (and at most
/// `to`), leaving out figures a cache made.
fn median(items: &[DiskItem], op: Op, mode: &str, from: u64, to: u64) -> Option<f64> {
    let rates: Vec<f64> = items
        .iter()
        .filter(|i| i.op == op && i.mode == mode && (from..=to).contains(&i.size_bytes))
        .filter(|i| !i.flags.contains(&Flag::FasterThanLink) && !i.flags.contains(&Flag::Cached))
        .map(|i| i.bytes_per_sec)
        .collect();
    Stats::of(&rates).map(|s| s.median)
}

/// Each operation's median over the files from `from` to `to` bytes: `write 1.26 GB/s,
/// read uncached 3.01 GB/s`.
fn rates_of(w: &Stored<DiskKind>, from: u64, to: u64) -> Option<String> {
    let parts: Vec<String> = columns(w)
        .iter()
        .filter_map(|(op, mode)| {
            let rate = median(&w.items, *op, mode, from, to)?;
            Some(format!("{} {}", words(*op, mode), format_rate(rate)))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The series' line of the summary: large files, small files, and the link's limit.
pub fn summary_lines(w: &Stored<DiskKind>) -> Vec<SummaryLine> {
    let sizes: Vec<u64> = w.items.iter().map(|i| i.size_bytes).collect();
    let (Some(&smallest), Some(&largest)) = (sizes.iter().min(), sizes.iter().max()) else {
        return Vec::new();
    };
    let floor = LARGE_BYTES.min(largest);
    let mut parts = Vec::new();
    if let Some(rates) = rates_of(w, floor, u64::MAX) {
        let files = if floor == largest {
            format!("{} files", format_size(largest))
        } else {
            format!("files of {} and more", format_size(floor))
        };
        parts.push(format!("{files}: {rates}"));
    }
    if smallest < floor
        && let Some(rates) = rates_of(w, smallest, smallest)
    {
        parts.push(format!("{} files: {rates}", format_size(smallest)));
    }
    // An unknown limit is said, with why, on the "not measured" line.
    if let Some(limit) = w.context.max_bytes_per_sec {
        parts.push(format!("link limit {}", format_rate(limit)));
    }
    vec![
        SummaryLine::new(
            "storage",
            format!("{}: {}", w.record.target, parts.join("; ")),
        )
        .covering(&["small_files_slower"]),
    ]
}

/// The link limit it could not find, and why in a few words.
pub fn unmeasured(w: &Stored<DiskKind>) -> Vec<Unmeasured> {
    if w.context.max_bytes_per_sec.is_some() {
        return Vec::new();
    }
    // The last step of the chain is where the walk stopped: `virtual disk: limit unknown`.
    let why = w
        .context
        .chain
        .iter()
        .flat_map(|chain| &chain.steps)
        .rev()
        .map(|step| step.detail.as_str())
        .find(|detail| !detail.is_empty())
        .unwrap_or("no link found");
    let why = why.trim_end_matches(": limit unknown");
    vec![Unmeasured::new(
        "link_unknown",
        format!("the link limit of {}", w.record.target),
        why,
    )]
}

/// A rate in MB/s with three figures at most, for narrow cells: `1264`, `28.6`, `7.10`.
fn cell(bytes_per_sec: f64) -> String {
    let mb = bytes_per_sec / 1e6;
    if mb >= 100.0 {
        format!("{mb:.0}")
    } else if mb >= 10.0 {
        format!("{mb:.1}")
    } else {
        format!("{mb:.2}")
    }
}

/// One size's row: each column's median and range, then the flags of its files.
fn brief_row(size: u64, columns: &[(Op, String)], rows: &[SizeRow]) -> Vec<String> {
    let mut row = vec![format_size(size)];
    let mut flags = std::collections::BTreeMap::<Flag, usize>::new();
    for (op, mode) in columns {
        let found = rows
            .iter()
            .find(|r| r.size_bytes == size && r.op == *op && r.mode == *mode);
        let Some(found) = found else {
            row.extend(["-".to_string(), "-".to_string()]);
            continue;
        };
        let rates: &RateSummary = &found.rates;
        row.push(cell(rates.median_bytes_per_sec));
        row.push(format!(
            "{}-{}",
            cell(rates.min_bytes_per_sec),
            cell(rates.max_bytes_per_sec)
        ));
        for (flag, count) in &found.flag_counts {
            *flags.entry(*flag).or_insert(0) += count;
        }
    }
    let notes: Vec<String> = flags
        .iter()
        .map(|(flag, count)| match flag {
            Flag::FasterThanLink => format!("{count} over link"),
            Flag::Cached => format!("{count} cached"),
            Flag::Small => format!("{count} short"),
        })
        .collect();
    row.push(notes.join(", "));
    row
}

/// One table: a row per size, each operation's median and range in MB/s, and notes.
pub fn brief_tables(w: &Stored<DiskKind>) -> Vec<Table> {
    let plan = &w.params.plan;
    let columns = columns(w);
    let rows = by_size(&w.items);
    let mut sizes: Vec<u64> = rows.iter().map(|r| r.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut header = vec!["size".to_string()];
    for (op, mode) in &columns {
        header.push(match op {
            Op::Write | Op::Rewrite => op.as_str().to_string(),
            Op::Read => format!("read {mode}"),
        });
        header.push("min-max".into());
    }
    header.push("notes".into());
    let table_rows = sizes
        .iter()
        .map(|&size| brief_row(size, &columns, &rows))
        .collect();
    let writes = format!(
        "{}, {}",
        plan.sync.as_str(),
        if plan.direct_writes {
            "O_DIRECT"
        } else {
            "buffered"
        }
    );
    let passes = if plan.repeat > 1 {
        format!(" · {} passes", plan.repeat)
    } else {
        String::new()
    };
    vec![Table {
        title: format!(
            "MB/s · writes {writes} · engine {}, {} blocks{passes}",
            plan.engine.as_str(),
            format_size(plan.block_size_bytes as u64)
        ),
        numeric: (1..header.len() - 1).collect(),
        header,
        rows: table_rows,
    }]
}
