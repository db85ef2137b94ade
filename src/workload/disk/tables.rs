//! The disk tables of text reports: one per operation and mode, a row per file size.

use super::DiskKind;
use super::verdicts::link_words;
use crate::document::Flag;
use crate::storage::rates::{SizeRow, by_size};
use crate::vocab::Table;
use crate::vocab::units::{format_rate, format_size, mb_per_sec};
use crate::workload::Stored;

use crate::storage::item::Op;

/// The tables for one disk workload.
pub fn tables(w: &Stored<DiskKind>) -> Vec<Table> {
    let limit = match w.context.max_bytes_per_sec {
        Some(limit) => format!(
            "link limit {} ({})",
            format_rate(limit),
            link_words(&w.context)
        ),
        None => format!("link limit unknown ({})", link_words(&w.context)),
    };
    let mut tables: Vec<Table> = Vec::new();
    for row in by_size(&w.items) {
        let title = title(w, &row, &limit);
        if tables.last().is_none_or(|t| t.title != title) {
            tables.push(Table {
                title,
                header: [
                    "size",
                    "median MB/s",
                    "min MB/s",
                    "max MB/s",
                    "n",
                    "in cache before",
                    "notes",
                ]
                .map(String::from)
                .to_vec(),
                rows: Vec::new(),
                numeric: vec![1, 2, 3, 4, 5],
            });
        }
        let table = tables.last_mut().expect("a table was just pushed");
        table.rows.push(cells(&row));
    }
    tables
}

/// The title of the table `row` belongs in: its operation and mode, the engine, the
/// block and, for writes, the link's `limit`.
fn title(w: &Stored<DiskKind>, row: &SizeRow, limit: &str) -> String {
    let plan = &w.params.plan;
    let engine = plan.engine.as_str();
    let block = format_size(plan.block_size_bytes as u64);
    match row.op {
        Op::Write | Op::Rewrite => format!(
            "{}, {}{} · engine {engine} · block {block} · {limit}",
            if row.op == Op::Write {
                "write"
            } else {
                "rewrite in place"
            },
            row.mode,
            if plan.direct_writes {
                ", O_DIRECT"
            } else {
                ", buffered"
            },
        ),
        Op::Read => format!("read, {} · engine {engine} · block {block}", row.mode),
    }
}

/// The cells of one size's row: its rates, count, what was cached and its notes.
fn cells(row: &SizeRow) -> Vec<String> {
    let notes: Vec<String> = row
        .flag_counts
        .iter()
        .map(|(flag, count)| match flag {
            Flag::FasterThanLink => format!("{count} faster than link (cache)"),
            Flag::Cached => format!("{count} cached"),
            Flag::Small => format!("{count} too short to time well"),
        })
        .collect();
    vec![
        format_size(row.size_bytes),
        mb_per_sec(row.rates.median_bytes_per_sec),
        mb_per_sec(row.rates.min_bytes_per_sec),
        mb_per_sec(row.rates.max_bytes_per_sec),
        row.rates.n.to_string(),
        row.mean_cached_fraction_before
            .map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0)),
        notes.join(", "),
    ]
}
