//! The terminal report: a header, the summary, the verdicts, then each workload's
//! tables. Words are wrapped to 80 columns with a hanging indent, so the summary and
//! the verdicts read on any terminal; tables wrap themselves.

use std::fmt::Write;

use comfy_table::{
    CellAlignment, ContentArrangement, ContentLineStyle, LineStyle, TableStyle, presets,
};

use super::layout::{self, Detail};
use crate::document::RunDocument;
use crate::vocab::Table;
use crate::workload::{self, At, DecodeError};

/// Columns the words of a report are wrapped to.
const WIDTH: usize = 80;

/// A table at a glance: columns apart, the header underlined, no box, so a table costs
/// its rows and two lines.
const GLANCE: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction(' '))
    .header_separator(LineStyle::none().fill('─').junction(' '))
    .content_lines(ContentLineStyle::none().junction(' '));

/// The run as text for a terminal, at `detail`.
pub fn render(doc: &RunDocument, detail: Detail) -> Result<String, DecodeError> {
    let mut out = head(doc)?;
    let listing = layout::listing(doc, detail)?;
    if !listing.verdicts.is_empty() || listing.unmeasured.is_some() || listing.left_out > 0 {
        let _ = writeln!(out, "\nverdicts:");
        for verdict in &listing.verdicts {
            let severity = layout::severity_name(verdict.severity);
            let head = format!("  {severity:<7} ");
            out.push_str(&hanging(
                &head,
                &format!("{}: {}", verdict.code, verdict.message),
            ));
        }
        if let Some(line) = &listing.unmeasured {
            out.push_str(&hanging("  ", line));
        }
        if listing.left_out > 0 {
            let show = doc.run_id.map_or("the JSON document".into(), |id| {
                format!("`ratelab results show {id}`")
            });
            out.push_str(&hanging(
                "  ",
                &format!(
                    "{} info verdicts the summary says in short: {show}",
                    listing.left_out
                ),
            ));
        }
    }
    for (index, record) in doc.workloads.iter().enumerate() {
        let _ = writeln!(out, "\n{}", layout::workload_heading(index, record));
        if let Some(shape) = record
            .series
            .as_ref()
            .and_then(|s| super::series::describe(s, workload::rate_unit(record)))
        {
            let _ = writeln!(out, "{shape}");
        }
        match layout::workload_tables(At::new(doc, index), detail)? {
            Some(tables) => {
                for table in &tables {
                    let _ = writeln!(out, "{}", drawn_text(table, detail));
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
    Ok(out)
}

/// The run's first lines: the run, the machine, and the summary.
pub fn head(doc: &RunDocument) -> Result<String, DecodeError> {
    let mut out = String::new();
    let _ = writeln!(out, "{}", layout::run_line(doc));
    let _ = writeln!(out, "{}", layout::machine_lines(doc));
    let summary = layout::summary(doc)?;
    if !summary.is_empty() {
        let _ = writeln!(out, "\nsummary:");
        let width = summary.iter().map(|l| l.part.len()).max().unwrap_or(0);
        for line in &summary {
            let head = format!("  {:<width$}  ", line.part);
            out.push_str(&hanging(&head, &line.text));
        }
    }
    Ok(out)
}

/// `text` after `head`, wrapped to [`WIDTH`] columns with later lines indented under
/// its first word, ending in a newline.
fn hanging(head: &str, text: &str) -> String {
    let indent = " ".repeat(textwrap::core::display_width(head));
    let options = textwrap::Options::new(WIDTH)
        .initial_indent(head)
        .subsequent_indent(&indent)
        .break_words(false);
    let mut out = textwrap::fill(text, options);
    out.push('\n');
    out
}

/// One table, drawn with comfy-table.
pub fn table_text(table: &Table) -> String {
    drawn_text(table, Detail::Full)
}

/// One table at `detail`: boxed in full, without its outer border at a glance, where
/// two lines per table add up.
fn drawn_text(table: &Table, detail: Detail) -> String {
    let mut drawn = comfy_table::Table::new();
    drawn
        .load_style(match detail {
            Detail::Full => presets::UTF8_FULL_CONDENSED,
            Detail::Brief => GLANCE,
        })
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
    match detail {
        Detail::Full => format!("{}\n{drawn}", table.title),
        Detail::Brief => {
            // Each cell is padded; a line's trailing blanks would only wrap a terminal.
            let lines: Vec<String> = drawn.lines().map(|l| l.trim_end().to_string()).collect();
            format!("{}{}", hanging("", &table.title), lines.join("\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::hanging;

    #[test]
    fn words_wrap_under_their_first_word() {
        let text =
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
        let out = hanging("  storage  ", text);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1, "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{out}");
        assert!(lines[1].starts_with("           one") || lines[1].starts_with("           "));
        assert!(lines[0].starts_with("  storage  one two"));
    }
}
