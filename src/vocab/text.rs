//! Text that came from outside ratelab (a peer on the wire, a file's name) made safe
//! for a terminal or a one-line log: a control character would move the cursor,
//! retitle a terminal or forge a log line, so each is written out as an escape.

use std::borrow::Cow;

/// `text` with every control character written as an escape (`\n`, `\x1b`, `\u{85}`);
/// borrowed, not copied, when it has none.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_out_and_plain_text_is_not_copied() {
        assert!(matches!(escaped("10 Gbit/s, 5 µs"), Cow::Borrowed(_)));
        assert_eq!(
            escaped("\x1b[2J\x1b]0;owned\x07fake\nratelab: test passed"),
            "\\x1b[2J\\x1b]0;owned\\x07fake\\nratelab: test passed"
        );
        assert_eq!(escaped("a\tb\rc\u{85}d\u{7f}"), "a\\tb\\rc\\u{85}d\\x7f");
    }
}
