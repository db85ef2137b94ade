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
        out.push('\n');
        out.push_str(&hanging("", &layout::workload_heading(index, record)));
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
    out.push_str(&hanging("", &layout::run_line(doc)));
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
pub(super) fn hanging(head: &str, text: &str) -> String {
    hanging_at(head, text, WIDTH)
}

/// A message for stderr, `head` then `text`: wrapped at spaces to the terminal's width,
/// later lines under its first word, where stderr is a terminal (which would otherwise
/// break lines inside words); one line where it is a pipe or a log.
pub fn for_stderr(head: &str, text: &str) -> String {
    use std::io::IsTerminal as _;
    let stderr = std::io::stderr();
    let width = if stderr.is_terminal() {
        rustix::termios::tcgetwinsize(&stderr)
            .ok()
            .map(|size| usize::from(size.ws_col))
    } else {
        None
    };
    match width {
        // A window too narrow to indent in gets the text as it is.
        Some(width) if width >= 40 => hanging_at(head, text, width),
        _ => format!("{head}{text}\n"),
    }
}

/// Writes `head` then `text` on stderr, as [`for_stderr`] lays it out.
pub fn say(head: &str, text: &str) {
    eprint!("{}", for_stderr(head, text));
}

/// [`hanging`] at `width` columns: only a word longer than a line is cut.
fn hanging_at(head: &str, text: &str, width: usize) -> String {
    let indent = " ".repeat(textwrap::core::display_width(head));
    let options = textwrap::Options::new(width)
        .initial_indent(head)
        .subsequent_indent(&indent)
        .break_words(true)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(&units_held(text), options).replace(HELD, " ");
    out.push('\n');
    out
}

/// A space no line is broken at, between a figure and its unit.
const HELD: char = '\u{a0}';

/// Units a figure keeps on its line: `2.22 GB/s` never ends one line and starts the next.
const UNITS: [&str; 22] = [
    "B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "MB/s", "GB/s", "kB/s",
    "Gbit/s", "Mbit/s", "ns", "µs", "ms", "s", "IOPS", "loops/s", "%",
];

/// `text` with the space between each figure and its unit held.
fn units_held(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out = String::with_capacity(text.len());
    for (n, word) in words.iter().enumerate() {
        if n > 0 {
            let figure = words[n - 1].ends_with(|c: char| c.is_ascii_digit());
            let unit = word.trim_end_matches(|c: char| ",;:.)".contains(c));
            out.push(if figure && UNITS.contains(&unit) {
                HELD
            } else {
                ' '
            });
        }
        out.push_str(word);
    }
    out
}

/// One table, drawn with comfy-table.
pub fn table_text(table: &Table) -> String {
    drawn_text(table, Detail::Full)
}

/// The columns a table may take: the terminal's width when stdout is one, else
/// `COLUMNS` when it is set; `None` (no limit) for a pipe or file without it.
fn output_width() -> Option<usize> {
    use std::io::IsTerminal as _;
    if std::io::stdout().is_terminal()
        && let Ok(size) = rustix::termios::tcgetwinsize(std::io::stdout())
        && size.ws_col > 0
    {
        return Some(usize::from(size.ws_col));
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&c: &usize| c > 0)
}

/// One table at `detail`: boxed in full, without its outer border at a glance, where
/// two lines per table add up. Where the output is narrower than the table, columns are
/// left out (those with one value in every row first, then from the right) and named
/// under the title, so no cell is ever broken; `--json`, Markdown and HTML keep them all.
fn drawn_text(table: &Table, detail: Detail) -> String {
    let width = output_width();
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
    // Words always wrap at a glance, as the summary's do; a full title wraps where the
    // width is known.
    let title = match (width, detail) {
        (Some(width), _) => wrapped(&title, width),
        (None, Detail::Brief) => wrapped(&title, WIDTH),
        (None, Detail::Full) => format!("{title}\n"),
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
/// lists, where threads ran and what limits a task. Where the key columns alone are
/// too wide, their cells wrap between words instead.
const KEY_COLUMNS: [&str; 12] = [
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

#[cfg(test)]
mod tests {
    use super::{hanging, units_held};

    #[test]
    fn a_figure_keeps_its_unit_on_its_line() {
        assert_eq!(
            units_held("read 2.22 GB/s, 5 files"),
            "read 2.22\u{a0}GB/s, 5 files"
        );
        let text = "the storage series read 2.22 GB/s there and the read step alone 2.48 GB/s";
        for line in hanging("  ", text).lines() {
            assert!(!line.ends_with(|c: char| c.is_ascii_digit()), "{line:?}");
        }
    }

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
