//! The terminal report: a header, each workload's tables, and one line per verdict.

use std::fmt::Write;

use comfy_table::{CellAlignment, ContentArrangement, presets};

use super::layout;
use crate::document::RunDocument;
use crate::vocab::Table;
use crate::workload::{self, At, DecodeError};

/// The run as text for a terminal.
pub fn render(doc: &RunDocument) -> Result<String, DecodeError> {
    let mut out = String::new();
    let _ = writeln!(out, "{}", layout::run_line(doc));
    let _ = writeln!(out, "{}", layout::machine_line(doc));
    for (index, record) in doc.workloads.iter().enumerate() {
        let _ = writeln!(out, "\n{}", layout::workload_heading(index, record));
        if let Some(shape) = record
            .series
            .as_ref()
            .and_then(|s| super::series::describe(s, workload::rate_unit(record)))
        {
            let _ = writeln!(out, "{shape}");
        }
        match layout::workload_tables(At::new(doc, index))? {
            Some(tables) => {
                for table in &tables {
                    let _ = writeln!(out, "{}", table_text(table));
                }
            }
            None => {
                let _ = writeln!(out, "({})", layout::unknown_kind(record));
            }
        }
    }
    if let Some(table) = super::contention::table(doc) {
        let _ = writeln!(out, "\n{}", table_text(&table));
    }
    if !doc.verdicts.is_empty() {
        let _ = writeln!(out, "\nverdicts:");
        for verdict in &doc.verdicts {
            let severity = layout::severity_name(verdict.severity);
            let _ = writeln!(out, "  {severity:<7} {}: {}", verdict.code, verdict.message);
        }
    }
    Ok(out)
}

/// One table, drawn with comfy-table.
pub fn table_text(table: &Table) -> String {
    let mut drawn = comfy_table::Table::new();
    drawn
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_header(&table.header);
    // Wrap cells only on a terminal wide enough to hold a readable table; a pty that
    // reports no width would otherwise squash every column to nothing.
    if drawn.width().is_some_and(|width| width >= 60) {
        drawn.set_content_arrangement(ContentArrangement::Dynamic);
    }
    for row in &table.rows {
        drawn.add_row(row);
    }
    for &index in &table.numeric {
        if let Some(column) = drawn.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!("{}\n{drawn}", table.title)
}
