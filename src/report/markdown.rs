//! The Markdown report: a run's tables and verdicts as GitHub-flavoured Markdown, to
//! paste into an issue. The tables are the very [`Table`] values of the terminal report,
//! so the two cannot say different things.

use std::fmt::Write;

use super::layout::{self, Detail};
use crate::document::RunDocument;
use crate::vocab::Table;
use crate::workload::{self, DecodeError, Decoded};

/// The run as Markdown: a heading, the machine, each workload's tables, contention and
/// the verdicts.
pub fn render(doc: &RunDocument) -> Result<String, DecodeError> {
    let run = Decoded::of(doc);
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", escape(&layout::run_line(doc)));
    let _ = writeln!(out, "{}\n", escape(&layout::machine_line(doc)));
    let summary = layout::summary(&run)?;
    if !summary.is_empty() {
        let _ = writeln!(out, "### summary\n");
        for line in &summary {
            let _ = writeln!(out, "- **{}** {}", line.part, escape(&line.text));
        }
        out.push('\n');
    }
    let listing = layout::listing(&run, Detail::Full)?;
    if !listing.verdicts.is_empty() || listing.unmeasured.is_some() {
        let _ = writeln!(out, "### verdicts\n");
        for verdict in &listing.verdicts {
            let _ = writeln!(
                out,
                "- **{}** `{}`: {}",
                layout::severity_name(verdict.severity),
                verdict.code,
                escape(&verdict.message)
            );
        }
        if let Some(line) = &listing.unmeasured {
            let _ = writeln!(out, "- {}", escape(line));
        }
        out.push('\n');
    }
    for (index, record) in doc.workloads.iter().enumerate() {
        let _ = writeln!(
            out,
            "### {}\n",
            escape(&layout::workload_heading(index, record))
        );
        if let Some(shape) = record
            .series
            .as_ref()
            .and_then(|s| super::series::describe(s, workload::rate_unit(record)))
        {
            // The sparkline's marks line up only in a fixed-width font.
            let _ = writeln!(out, "```text\n{shape}\n```\n");
        }
        match layout::workload_tables(&run, index, Detail::Full)? {
            Some(tables) => {
                for table in &tables {
                    let _ = writeln!(out, "{}", table_markdown(table));
                }
            }
            None => {
                let _ = writeln!(out, "_{}_\n", escape(&layout::unknown_kind(record)));
            }
        }
    }
    if let Some(table) = super::contention::table(doc) {
        let _ = writeln!(out, "{}", table_markdown(&table));
    }
    Ok(out)
}

/// One table: its title in bold, then a GitHub table with numeric columns aligned
/// right, and a blank line after it.
pub fn table_markdown(table: &Table) -> String {
    let mut out = format!("**{}**\n\n", escape(&table.title));
    let row = |cells: &[String]| {
        let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    out.push_str(&row(&table.header));
    let rule: Vec<String> = (0..table.header.len())
        .map(|index| {
            if table.numeric.contains(&index) {
                "---:".to_string()
            } else {
                "---".to_string()
            }
        })
        .collect();
    out.push_str(&row(&rule));
    for cells in &table.rows {
        out.push_str(&row(cells));
    }
    out
}

/// Text with Markdown's special characters escaped, so paths and messages show as
/// written (`a_b` stays `a_b`, `|` does not end a cell).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            // An entity would be decoded (`&amp;` shows as `&`); a line break would end
            // a heading or a cell.
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '|' | '<' | '>' | '[' | ']' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A table cell: escaped, and on one line.
fn cell(text: &str) -> String {
    let escaped = text
        .split('\n')
        .map(escape)
        .collect::<Vec<_>>()
        .join("<br>");
    if escaped.is_empty() {
        " ".to_string()
    } else {
        escaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_in_github_markdown() {
        let table = Table {
            title: "write, fsync · /mnt/a_b".into(),
            header: vec!["size".into(), "median MB/s".into(), "notes".into()],
            rows: vec![vec!["4 MiB".into(), "40.1".into(), "a|b".into()]],
            numeric: vec![1],
        };
        assert_eq!(
            table_markdown(&table),
            "**write, fsync · /mnt/a\\_b**\n\n\
             | size | median MB/s | notes |\n\
             | --- | ---: | --- |\n\
             | 4 MiB | 40.1 | a\\|b |\n"
        );
    }

    #[test]
    fn empty_cells_keep_their_column() {
        assert_eq!(cell(""), " ");
        assert_eq!(cell("two\nlines"), "two<br>lines");
    }
}
