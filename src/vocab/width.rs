//! The one width rule every line ratelab writes keeps: words wrap at the terminal's
//! width with a hanging indent, or at `COLUMNS` where the output is a file or pipe and
//! it is set; without either nothing is wrapped. Reports, plans, warnings, errors and
//! the server's log all wrap here, so none can disagree.

use std::io::IsTerminal;
use std::os::fd::AsFd;

/// The narrowest width words are wrapped to: in a narrower window a hanging indent
/// leaves no room, and the text is written as it is.
pub const NARROWEST: usize = 40;

/// The columns lines written to `stream` wrap at: the terminal's width where `stream`
/// is one, else `COLUMNS` where it is set (a script or a CI log asking for a width);
/// `None` where neither says, and nothing is wrapped.
fn width_of(stream: impl AsFd + IsTerminal) -> Option<usize> {
    if stream.is_terminal()
        && let Ok(size) = rustix::termios::tcgetwinsize(&stream)
        && size.ws_col > 0
    {
        return Some(usize::from(size.ws_col));
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&c: &usize| c > 0)
}

/// The width of what goes to stdout: reports, tables, listings.
pub fn stdout_width() -> Option<usize> {
    width_of(std::io::stdout())
}

/// A message for stderr, `head` then `text`, wrapped at stderr's width (see
/// [`width_of`]) with later lines under its first word, so a terminal never breaks a
/// line inside a word.
pub fn for_stderr(head: &str, text: &str) -> String {
    hanging_at(head, text, width_of(std::io::stderr()))
}

/// Writes `head` then `text` on stderr, as [`for_stderr`] lays it out.
pub fn say(head: &str, text: &str) {
    eprint!("{}", for_stderr(head, text));
}

/// `head` then `text` wrapped at `width` columns, only a word longer than a line cut;
/// as it is, on one line, without a width or in one too narrow to indent in.
pub fn hanging_at(head: &str, text: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|&w| w >= NARROWEST) else {
        return format!("{head}{text}\n");
    };
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

/// `line` cut to `width` columns at a space, ending in ` …` where it was cut; as it is
/// without a width.
pub fn one_line(line: &str, width: Option<usize>) -> String {
    let Some(width) = width.filter(|&w| w >= NARROWEST) else {
        return line.to_string();
    };
    if textwrap::core::display_width(line) <= width {
        return line.to_string();
    }
    let mut kept = String::new();
    for (n, word) in line.split(' ').enumerate() {
        let next = match n {
            0 => word.to_string(),
            _ => format!("{kept} {word}"),
        };
        if textwrap::core::display_width(&next) + 2 > width {
            break;
        }
        kept = next;
    }
    // A first word wider than the line is cut inside it.
    if kept.trim().is_empty() {
        kept = line.chars().take(width - 2).collect();
    }
    format!("{} …", kept.trim_end_matches([',', ';', ':', ' ']))
}

/// A space no line is broken at, between a figure and its unit.
pub const HELD: char = '\u{a0}';

/// Units a figure keeps on its line: `2.22 GB/s` never ends one line and starts the next.
const UNITS: [&str; 22] = [
    "B", "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "MB/s", "GB/s", "kB/s",
    "Gbit/s", "Mbit/s", "ns", "µs", "ms", "s", "IOPS", "loops/s", "%",
];

/// `text` with the space between each figure and its unit held.
pub fn units_held(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::{hanging_at, one_line, units_held};

    #[test]
    fn a_line_too_wide_is_cut_at_a_space_and_says_so() {
        let line = "  warning small_files_slower: writes of 10 KiB files ran at 2.0% of the rate of 8 MiB files";
        let cut = one_line(line, Some(60));
        assert!(cut.ends_with('…'), "{cut}");
        assert!(cut.chars().count() <= 60, "{cut}");
        assert!(line.starts_with(cut.trim_end_matches('…')), "{cut}");
        assert_eq!(one_line(line, None), line);
        assert_eq!(one_line(line, Some(200)), line);
    }

    #[test]
    fn a_figure_keeps_its_unit_on_its_line() {
        assert_eq!(
            units_held("read 2.22 GB/s, 5 files"),
            "read 2.22\u{a0}GB/s, 5 files"
        );
        let text = "the storage series read 2.22 GB/s there and the read step alone 2.48 GB/s";
        for line in hanging_at("  ", text, Some(80)).lines() {
            assert!(!line.ends_with(|c: char| c.is_ascii_digit()), "{line:?}");
        }
    }

    #[test]
    fn words_wrap_under_their_first_word() {
        let text =
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
        let out = hanging_at("  storage  ", text, Some(80));
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines.len() > 1, "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{out}");
        assert!(lines[1].starts_with("           one") || lines[1].starts_with("           "));
        assert!(lines[0].starts_with("  storage  one two"));
        assert_eq!(
            hanging_at("  storage  ", text, None),
            format!("  storage  {text}\n")
        );
        assert_eq!(hanging_at("  ", text, Some(30)), format!("  {text}\n"));
    }
}
