//! Safe text output. Task names (`prctl(PR_SET_NAME)`), paths from the
//! captured maps and symbol names from binaries are chosen by whoever ran the
//! profiled programs: printed raw, a name could carry terminal escape
//! sequences (rewrite the screen, set the window title, worse on some
//! terminals), newlines that forge report lines, or bytes that are not UTF-8.
//! Every text output (report, script, folded, warnings, errors) goes through
//! [`esc`]; raw bytes become text through [`from_bytes`].

use std::borrow::Cow;
use std::fmt::Write;

/// Characters [`esc`] rewrites: C0 controls (ESC, BEL, newline, tab...), DEL,
/// C1 controls (`U+0080`..`U+009F`, 8-bit CSI included), and the bidirectional
/// overrides and isolates that reorder what a terminal shows.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every control character written as a visible escape: `\n`, `\t`,
/// `\r`, `\e` (ESC), `\xNN` for other C0 controls and DEL, `\u{NNNN}` for C1
/// controls and bidirectional overrides. Everything else, backslashes
/// included, is kept as it is. Borrows when there is nothing to escape.
pub fn esc(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            c if (c as u32) < 0x80 && needs_escape(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Text of raw bytes (a COMM record's name, a path): valid UTF-8 is kept,
/// every byte of an invalid sequence becomes `\xNN` (so two different names
/// never print the same, as they could with U+FFFD).
pub fn from_bytes(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => {
            let mut out = String::with_capacity(b.len() + 8);
            for chunk in b.utf8_chunks() {
                out.push_str(chunk.valid());
                for byte in chunk.invalid() {
                    let _ = write!(out, "\\x{byte:02x}");
                }
            }
            Cow::Owned(out)
        }
    }
}

/// A name for the folded-stack format (`frame;frame;frame COUNT`): escaped,
/// and `;` (the frame separator) written as `:`. Spaces are fine (the count
/// is after the last one).
pub fn folded_frame(s: &str) -> String {
    esc(s).replace(';', ":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(esc("plain name"), "plain name");
        assert!(matches!(esc("plain"), Cow::Borrowed(_)));
        assert_eq!(esc("a\x1b[2Jb"), "a\\e[2Jb");
        assert_eq!(esc("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(esc("bel\x07del\x7f"), "bel\\x07del\\x7f");
        assert_eq!(esc("c1\u{9b}31m"), "c1\\u{009b}31m");
        assert_eq!(esc("rtl\u{202e}gnp.exe"), "rtl\\u{202e}gnp.exe");
        // Printable non-ASCII and backslashes stay.
        assert_eq!(esc("größe\\x"), "größe\\x");
        for c in (0u8..0x20).chain([0x7f]) {
            let s = (c as char).to_string();
            assert!(!esc(&s).chars().any(|c| c.is_control()), "{c:#x}");
        }
    }

    #[test]
    fn invalid_utf8_is_shown_byte_by_byte() {
        assert_eq!(from_bytes(b"ok"), "ok");
        assert_eq!(from_bytes(b"a\xffb\xc3"), "a\\xffb\\xc3");
        assert_eq!(from_bytes("é".as_bytes()), "é");
    }

    #[test]
    fn folded_frames_cannot_break_the_format() {
        assert_eq!(folded_frame("a;b\nc 1"), "a:b\\nc 1");
    }
}
