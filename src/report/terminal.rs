//! The terminal report: a header, each workload's tables, and one line per verdict.

use std::fmt::Write;

use comfy_table::{CellAlignment, ContentArrangement, presets};

use super::Table;
use super::units::format_bytes;
use crate::document::{RunDocument, Severity};
use crate::workload;

/// The run as text for a terminal.
pub fn render(doc: &RunDocument) -> String {
    let mut out = String::new();
    let id = doc
        .run_id
        .map_or("not stored".to_string(), |id| format!("run {id}"));
    let label = doc
        .label
        .as_deref()
        .map(|l| format!(" · {l}"))
        .unwrap_or_default();
    let reason = doc
        .incomplete_reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{id} · {} · {}{reason} · {}{label}",
        doc.verb,
        doc.status.as_str(),
        doc.started_at
    );
    let m = &doc.machine;
    let _ = writeln!(
        out,
        "machine: {} · {} · {} CPUs · {} memory · Linux {}",
        m.hostname,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.logical_cpus,
        m.memory_bytes.map_or("unknown".into(), format_bytes),
        m.kernel
    );
    for (index, record) in doc.workloads.iter().enumerate() {
        let alone = record
            .alone_of
            .map(|of| format!(" (alone, for {} {})", record.kind, of + 1))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\n{} {}{alone}: {}",
            record.kind,
            index + 1,
            record.target
        );
        if let Some(shape) = record.series.as_ref().and_then(super::series::describe) {
            let _ = writeln!(out, "{shape}");
        }
        match workload::kind(&record.kind) {
            Some(kind) => {
                // A table with no rows (a run stopped before its first item) says nothing.
                for table in kind
                    .tables(record)
                    .into_iter()
                    .filter(|t| !t.rows.is_empty())
                {
                    let _ = writeln!(out, "{}", table_text(&table));
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "(kind {} is not known to this ratelab version)",
                    record.kind
                );
            }
        }
    }
    if let Some(table) = doc.contention.as_ref().and_then(super::contention::table) {
        let _ = writeln!(out, "\n{}", table_text(&table));
    }
    if !doc.verdicts.is_empty() {
        let _ = writeln!(out, "\nverdicts:");
        for verdict in &doc.verdicts {
            let severity = match verdict.severity {
                Severity::Info => "info",
                Severity::Warning => "warning",
                Severity::Error => "error",
            };
            let _ = writeln!(out, "  {severity:<7} {}: {}", verdict.code, verdict.message);
        }
    }
    out
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
