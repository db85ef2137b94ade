//! The terminal report: a header, the summary, the verdicts, then each workload's
//! tables, its words and tables fitted to the output's width (crate::vocab::width).

use std::fmt::Write;

use comfy_table::{
    CellAlignment, ContentArrangement, ContentLineStyle, LineStyle, TableStyle, presets,
};

use super::layout::{self, Detail};
use crate::analysis::interference::DISTURBED;
use crate::document::RunDocument;
use crate::vocab::Table;
use crate::vocab::width::{HELD, hanging_at, one_line, units_held};
pub use crate::vocab::width::{for_stderr, say, stdout_width};
use crate::workload::{self, DecodeError, Decoded};

/// A table at a glance: columns apart, the header underlined, no box, so a table costs
/// its rows and two lines.
const GLANCE: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction(' '))
    .header_separator(LineStyle::none().fill('─').junction(' '))
    .content_lines(ContentLineStyle::none().junction(' '));

/// The run as text for a terminal, at `detail`.
pub fn render(run: &Decoded, detail: Detail) -> Result<String, DecodeError> {
    let doc = run.doc;
    let mut out = head(run, detail)?;
    let listing = layout::listing(run, detail)?;
    if !listing.verdicts.is_empty() || listing.unmeasured.is_some() || listing.left_out > 0 {
        let _ = writeln!(out, "\nverdicts:");
        match detail {
            Detail::Full => full_verdicts(&mut out, doc, &listing),
            Detail::Brief => brief_verdicts(&mut out, doc, &listing),
        }
    }
    for (index, record) in doc.workloads.iter().enumerate() {
        out.push('\n');
        out.push_str(&hanging("", &layout::workload_heading(index, record)));
        if let Some(shape) = record
            .series
            .as_ref()
            .and_then(|s| super::series::describe(s, workload::rate_unit(record)))
        {
            let _ = writeln!(out, "{shape}");
        }
        match layout::workload_tables(run, index, detail)? {
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

/// The verdicts in full, each wrapped under its severity.
fn full_verdicts(out: &mut String, doc: &RunDocument, listing: &layout::Listing) {
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
        out.push_str(&hanging(
            "  ",
            &format!(
                "{} info verdicts the summary says in short: {}",
                listing.left_out,
                where_in_full(doc)
            ),
        ));
    }
}

/// The verdicts at a glance: one line each (those of one code folded into one), its
/// code and the finding that set it off, then where each is said in full.
fn brief_verdicts(out: &mut String, doc: &RunDocument, listing: &layout::Listing) {
    let width = stdout_width();
    for (verdict, count) in layout::folded(&listing.verdicts) {
        let severity = layout::severity_name(verdict.severity);
        let times = match count {
            1 => String::new(),
            n => format!(" ({n}×)"),
        };
        let line = format!(
            "  {severity:<7} {}{times}: {}",
            verdict.code,
            layout::gist(&verdict.message)
        );
        let _ = writeln!(out, "{}", one_line(&line, width));
    }
    if let Some(line) = &listing.unmeasured {
        let _ = writeln!(out, "{}", one_line(&format!("  {line}"), width));
    }
    let also = match listing.left_out {
        0 => String::new(),
        n => format!(", and {n} info verdicts the summary says in short"),
    };
    let line = format!("  each in full: {}{also}", where_in_full(doc));
    let _ = writeln!(out, "{}", one_line(&line, width));
}

/// Where a run's verdicts are said in full.
fn where_in_full(doc: &RunDocument) -> String {
    doc.run_id.map_or("the JSON document".into(), |id| {
        format!("`ratelab results show {id}`")
    })
}

/// Lines the account of other work, or of what moved since the last profile, takes at
/// a glance: who held the run's threads and for how long fit, or what moved; the
/// stages and changes each names are all in the full report.
const DISTURBED_LINES: usize = 2;

/// The run's first lines: the run, the machine, and the summary; at a glance, the
/// accounts of other work and of what moved cut to [`DISTURBED_LINES`].
pub fn head(run: &Decoded, detail: Detail) -> Result<String, DecodeError> {
    let doc = run.doc;
    let mut out = String::new();
    out.push_str(&hanging("", &layout::run_line(doc)));
    let _ = writeln!(out, "{}", layout::machine_lines(doc, stdout_width()));
    let summary = layout::summary(run)?;
    if !summary.is_empty() {
        let _ = writeln!(out, "\nsummary:");
        let width = summary.iter().map(|l| l.part.len()).max().unwrap_or(0);
        for line in &summary {
            let head = format!("  {:<width$}  ", line.part);
            let text = hanging(&head, &line.text);
            // At a glance the accounts of other work and of what moved since the last
            // profile are cut: what each found and who did it come first.
            match detail == Detail::Brief
                && [DISTURBED, layout::SINCE].contains(&line.part.as_str())
            {
                true => out.push_str(&at_most(&text, DISTURBED_LINES)),
                false => out.push_str(&text),
            }
        }
    }
    Ok(out)
}

/// `text`'s first `lines` lines, the last ending in ` …` where more were left out.
fn at_most(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    if all.len() <= lines {
        return text.to_string();
    }
    let mut kept: Vec<String> = all[..lines].iter().map(|l| l.to_string()).collect();
    if let Some(last) = kept.last_mut() {
        // The mark after the last line, its last words giving way where it is full.
        *last = one_line(&format!("{last} …"), stdout_width());
    }
    kept.join("\n") + "\n"
}

/// `text` after `head` for stdout, wrapped at its width with later
/// lines indented under its first word, ending in a newline.
pub(super) fn hanging(head: &str, text: &str) -> String {
    hanging_at(head, text, stdout_width())
}

/// One table, drawn with comfy-table.
pub fn table_text(table: &Table) -> String {
    drawn_text(table, Detail::Full)
}

/// One table at `detail`: boxed in full, without its outer border at a glance, where
/// two lines per table add up. Where the output is narrower than the table, columns are
/// left out (those with one value in every row first, then from the right) and named
/// under the title, so no cell is ever broken; `--json`, Markdown and HTML keep them all.
fn drawn_text(table: &Table, detail: Detail) -> String {
    let width = stdout_width();
    let (fitted, left_out) = fit(table, detail, width);
    let drawn = drawn(&fitted, detail, width);
    let mut title = fitted.title.clone();
    if !left_out.is_empty() {
        title.push_str(&format!(
            " · left out to fit {} columns: {} (`--json` has them)",
            width.unwrap_or_default(),
            left_out.join(", ")
        ));
    }
    let title = match width {
        Some(width) => wrapped(&title, width),
        None => format!("{title}\n"),
    };
    match detail {
        Detail::Full => format!("{title}{drawn}"),
        Detail::Brief => {
            // Each cell is padded; a line's trailing blanks would only wrap a terminal.
            let lines: Vec<String> = drawn.lines().map(|l| l.trim_end().to_string()).collect();
            format!("{title}{}", lines.join("\n"))
        }
    }
}

/// The table as comfy-table draws it, each cell on one line; where it is still wider
/// than `width` with only its key columns left, their cells wrap between words.
fn drawn(table: &Table, detail: Detail, width: Option<usize>) -> String {
    let mut drawn = comfy_table::Table::new();
    drawn
        .load_style(match detail {
            Detail::Full => presets::UTF8_FULL_CONDENSED,
            Detail::Brief => GLANCE,
        })
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty()
        .set_header(&table.header);
    if let Some(width) = width
        && widest(&drawn_once(table, detail)) > width
    {
        drawn
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(u16::try_from(width).unwrap_or(u16::MAX));
    }
    for row in &table.rows {
        drawn.add_row(row);
    }
    for &index in &table.numeric {
        if let Some(column) = drawn.column_mut(index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    drawn.to_string()
}

/// The widest line of `drawn`.
fn widest(drawn: &str) -> usize {
    drawn
        .lines()
        .map(|l| textwrap::core::display_width(l.trim_end()))
        .max()
        .unwrap_or(0)
}

/// `table` drawn with every cell on one line, whatever its width.
fn drawn_once(table: &Table, detail: Detail) -> String {
    drawn(table, detail, None)
}

/// The columns no table leaves out to fit a width, by name, besides its first (what a
/// row is about): which row it is (a size, a band, a thread count), what a comparison
/// concludes (`p (3)` and `run 3 vs 1` where it has several runs), what a listing
/// lists and what each run found, where threads ran and what limits a task. Where
/// the key columns alone are too wide, their cells wrap between words instead.
const KEY_COLUMNS: [&str; 13] = [
    "size",
    "size band",
    "threads",
    "change",
    "p",
    "verdict",
    "started (UTC)",
    "verb",
    "targets",
    "status",
    "answer",
    "cpus seen",
    "limit",
];

/// Whether the column named `name` is a key column.
fn is_key(name: &str) -> bool {
    KEY_COLUMNS.contains(&name)
        || name.starts_with("p (")
        || name.starts_with("verdict (")
        || name.contains(" vs ")
}

/// The table with as few columns left out as fit it in `width`, and the names of those
/// left out (a column with one value in every row as `name value`): constant columns
/// first, then from the right, a key column never.
fn fit(table: &Table, detail: Detail, width: Option<usize>) -> (Table, Vec<String>) {
    let mut fitted = table.clone();
    let mut left_out = Vec::new();
    let Some(width) = width else {
        return (fitted, left_out);
    };
    let key = |t: &Table, c: usize| is_key(&t.header[c]);
    while widest(&drawn_once(&fitted, detail)) > width {
        let constant = (1..fitted.header.len()).find(|&c| {
            !key(&fitted, c)
                && fitted.rows.len() > 1
                && fitted.rows.iter().all(|r| r[c] == fitted.rows[0][c])
        });
        let Some(column) =
            constant.or_else(|| (1..fitted.header.len()).rev().find(|&c| !key(&fitted, c)))
        else {
            break;
        };
        let name = match constant {
            // A column of empty cells loses nothing.
            Some(c) if fitted.rows[0][c].is_empty() => String::new(),
            Some(c) => format!("{} {}", fitted.header[c], fitted.rows[0][c]),
            None => fitted.header[column].clone(),
        };
        if !name.trim().is_empty() {
            left_out.push(name.trim().to_string());
        }
        fitted = fitted.without_column(column);
    }
    (fitted, left_out)
}

/// `text` wrapped to `width` columns at spaces, never inside a word that fits a line
/// (a path longer than the line is cut at its width), with a newline.
fn wrapped(text: &str, width: usize) -> String {
    let options = textwrap::Options::new(width)
        .break_words(true)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(&units_held(text), options).replace(HELD, " ");
    out.push('\n');
    out
}
