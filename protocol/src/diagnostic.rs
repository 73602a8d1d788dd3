//! Diagnostics a client may print: every provider error, tool error and
//! daemon error passes through [`diagnostic`] before it goes on the wire.
//!
//! A model's reply, a tool's output and an HTTP error body are written by
//! someone else. Shown as is, an escape sequence in them could clear a
//! terminal, retitle it or recolour what follows, a bidi override could make
//! text read differently from what it is, and a megabyte of it would flood a
//! log. So a diagnostic keeps its readable text and loses the rest:
//!
//! - `\n` and `\t` stay; `\r\n` and a lone `\r` become `\n`;
//! - ANSI escape sequences are dropped whole: CSI (`ESC [` … a final byte
//!   `@`–`~`), the string sequences OSC, DCS, SOS, PM and APC (`ESC ]`,
//!   `ESC P`, `ESC X`, `ESC ^`, `ESC _` … BEL or `ESC \`), and two-character
//!   `ESC x`;
//! - every other C0 control, DEL, C1 control (U+0080–U+009F), Unicode format
//!   character (general category Cf) and the line and paragraph separators
//!   become U+FFFD, one for a run of them;
//! - the result is at most [`DIAGNOSTIC_LIMIT`] bytes, marker included: a
//!   longer one is cut at a character boundary and ends with
//!   `… [truncated, N bytes more]`.
//!
//! One pass over the text, whatever it holds. `docs/PROTOCOL-NOTES.md`
//! ("Diagnostics") is the user-facing description.

/// The most bytes a diagnostic takes, truncation marker included. Enough for
/// any real error message and a screenful of context; small enough that a
/// thousand of them in a log are still only 4 MB.
pub const DIAGNOSTIC_LIMIT: usize = 4096;

/// What stands for characters a diagnostic cannot show.
const REPLACEMENT: char = '\u{FFFD}';

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
/// The 8-bit string terminator, which ends a string sequence like `ESC \`.
const ST: char = '\u{9c}';

/// `text` made safe to show: controls and format characters out, at most
/// [`DIAGNOSTIC_LIMIT`] bytes (see the module documentation). A clean
/// string within the limit is returned unchanged.
pub fn diagnostic(text: &str) -> String {
    if is_diagnostic(text) { text.to_owned() } else { scrub(text) }
}

/// [`diagnostic`] for an owned string: no copy when it is already clean.
pub fn into_diagnostic(text: String) -> String {
    if is_diagnostic(&text) { text } else { scrub(&text) }
}

/// Whether `text` is its own diagnostic.
pub fn is_diagnostic(text: &str) -> bool {
    text.len() <= DIAGNOSTIC_LIMIT && !text.chars().any(|c| c == '\r' || c == ESC || unshown(c))
}

/// A character that becomes U+FFFD: a control other than `\n` and `\t`, or
/// a format character.
pub fn unshown(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\0'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        _ => c > '\u{9f}' && format_character(c),
    }
}

/// General category Cf (Unicode 15.1), plus the separators U+2028 and
/// U+2029, which some readers take for line breaks.
fn format_character(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// Drops escape sequences and replaces what cannot be shown, then cuts.
fn scrub(text: &str) -> String {
    let mut out = Sink::default();
    // Once a string sequence has run to the end of the text unterminated,
    // every later one would too: knowing it keeps the pass linear.
    let mut unterminated = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push('\n');
            }
            ESC => match chars.peek().copied() {
                Some('[') => {
                    chars.next();
                    // Parameter and intermediate bytes, then the final byte.
                    while chars.next_if(|c| matches!(c, ' '..='?')).is_some() {}
                    if chars.next_if(|c| matches!(c, '@'..='~')).is_none() {
                        out.replace();
                    }
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    // A string sequence: dropped up to its terminator, or
                    // defused (its ESC replaced) when it has none.
                    let rest = chars.clone();
                    chars.next();
                    if unterminated || !skip_string(&mut chars) {
                        unterminated = true;
                        chars = rest;
                        out.replace();
                    }
                }
                Some(' '..='~') => {
                    chars.next();
                }
                _ => out.replace(),
            },
            c if unshown(c) => out.replace(),
            c => out.push(c),
        }
    }
    out.finish()
}

/// Consumes a string sequence's body and terminator (BEL, `ESC \` or ST);
/// false when the text ended first.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    while let Some(c) = chars.next() {
        match c {
            BEL | ST => return true,
            ESC if chars.next_if_eq(&'\\').is_some() => return true,
            _ => {}
        }
    }
    false
}

/// The cleaned text as it is written: only the first [`DIAGNOSTIC_LIMIT`]
/// bytes are kept (memory stays bounded whatever the input), the rest only
/// counted, for the marker.
#[derive(Default)]
struct Sink {
    kept: String,
    len: usize,
    replaced: bool,
}

impl Sink {
    fn push(&mut self, c: char) {
        self.len += c.len_utf8();
        if self.len <= DIAGNOSTIC_LIMIT {
            self.kept.push(c);
        }
        self.replaced = false;
    }

    /// U+FFFD, once for a run of replaced characters.
    fn replace(&mut self) {
        if !self.replaced {
            self.push(REPLACEMENT);
            self.replaced = true;
        }
    }

    /// At most [`DIAGNOSTIC_LIMIT`] bytes, marker included.
    fn finish(mut self) -> String {
        if self.len <= DIAGNOSTIC_LIMIT {
            return self.kept;
        }
        // The marker's count is at most the whole length, so a marker sized
        // for that many digits always fits.
        let mut cut = DIAGNOSTIC_LIMIT - marker(self.len).len();
        while !self.kept.is_char_boundary(cut) {
            cut -= 1;
        }
        self.kept.truncate(cut);
        self.kept.push_str(&marker(self.len - cut));
        self.kept
    }
}

fn marker(more: usize) -> String {
    format!("… [truncated, {more} bytes more]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> String {
        let shown = diagnostic(text);
        assert!(shown.len() <= DIAGNOSTIC_LIMIT, "{} bytes", shown.len());
        assert_eq!(diagnostic(&shown), shown, "a diagnostic is its own diagnostic");
        shown
    }

    #[test]
    fn a_clean_short_string_is_unchanged() {
        for text in
            ["", "file not found: src/main.rs", "two\nlines\tand a tab", "naïve ✓ 日本語 🙂"]
        {
            assert_eq!(diagnostic(text), text);
            assert!(is_diagnostic(text));
            assert_eq!(into_diagnostic(text.to_owned()), text);
        }
    }

    #[test]
    fn csi_sequences_are_dropped_whole() {
        assert_eq!(shown("\u{1b}[2J\u{1b}[31mred\u{1b}[0m text"), "red text");
        assert_eq!(shown("a\u{1b}[38;5;196mb\u{1b}[?25lc"), "abc");
    }

    #[test]
    fn string_sequences_are_dropped_up_to_their_terminator() {
        assert_eq!(shown("a\u{1b}]0;pwned\u{7}b"), "ab");
        assert_eq!(shown("a\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\b"), "alinkb");
        assert_eq!(shown("a\u{1b}Pq#0;2;0;0;0\u{1b}\\b"), "ab");
    }

    #[test]
    fn an_unterminated_string_sequence_keeps_the_text_after_it() {
        assert_eq!(shown("a\u{1b}]0;title"), "a\u{fffd}]0;title");
        // Many of them stay linear (see the 100 KB test) and all are defused.
        let many = "\u{1b}]x".repeat(3);
        assert_eq!(shown(&many), "\u{fffd}]x\u{fffd}]x\u{fffd}]x");
    }

    #[test]
    fn two_character_escapes_are_dropped() {
        assert_eq!(shown("a\u{1b}cb\u{1b}7c\u{1b}=d"), "abcd");
    }

    #[test]
    fn a_broken_escape_is_replaced() {
        assert_eq!(shown("a\u{1b}"), "a\u{fffd}");
        assert_eq!(shown("a\u{1b}\u{1b}"), "a\u{fffd}");
        assert_eq!(shown("a\u{1b}[12\u{7}b"), "a\u{fffd}b");
        assert_eq!(shown("a\u{1b}é"), "a\u{fffd}é");
    }

    #[test]
    fn controls_become_one_replacement_per_run() {
        assert_eq!(shown("a\0\0\0b"), "a\u{fffd}b");
        assert_eq!(shown("a\u{7}b\u{8}c\u{7f}d"), "a\u{fffd}b\u{fffd}c\u{fffd}d");
        assert_eq!(shown("a\u{85}\u{9b}31mb"), "a\u{fffd}31mb");
        assert_eq!(shown("a\0\u{1b}[1m\0b"), "a\u{fffd}b");
    }

    #[test]
    fn format_characters_are_replaced() {
        for c in [
            '\u{ad}',
            '\u{61c}',
            '\u{180e}',
            '\u{200b}',
            '\u{200d}',
            '\u{200f}',
            '\u{202a}',
            '\u{202e}',
            '\u{2028}',
            '\u{2029}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{fff9}',
            '\u{fffb}',
            '\u{e0041}',
        ] {
            assert_eq!(shown(&format!("a{c}b")), "a\u{fffd}b", "U+{:04X}", u32::from(c));
        }
        assert_eq!(shown("user\u{202e}txt.exe"), "user\u{fffd}txt.exe");
    }

    #[test]
    fn newlines_and_tabs_stay_and_carriage_returns_become_newlines() {
        assert_eq!(shown("a\r\nb\rc\n\td"), "a\nb\nc\n\td");
        assert_eq!(shown("a\r\r\nb"), "a\n\nb");
    }

    #[test]
    fn a_long_text_is_cut_with_a_marker_that_fits() {
        let text = "x".repeat(100 * 1024);
        let shown = shown(&text);
        assert!(shown.starts_with("xxxx"));
        let cut = shown.find('…').expect("marker");
        assert_eq!(shown[cut..], format!("… [truncated, {} bytes more]", text.len() - cut));
        assert!(shown.len() > DIAGNOSTIC_LIMIT - 40, "the budget is used: {}", shown.len());
    }

    #[test]
    fn exactly_the_limit_is_not_cut() {
        let text = "y".repeat(DIAGNOSTIC_LIMIT);
        assert_eq!(diagnostic(&text), text);
        let over = "y".repeat(DIAGNOSTIC_LIMIT + 1);
        assert!(shown(&over).ends_with(" bytes more]"));
    }

    #[test]
    fn the_cut_falls_on_a_character_boundary() {
        for offset in 0..4 {
            let text = format!("{}{}", "a".repeat(offset), "😀".repeat(2000));
            let shown = shown(&text);
            let cut = shown.find('…').expect("marker");
            assert!(shown[..cut].ends_with('😀'), "offset {offset}");
        }
    }

    #[test]
    fn a_hostile_100_kb_text_is_clean_bounded_and_quick() {
        let mut text = String::from("provider said: ");
        while text.len() < 100 * 1024 {
            text.push_str("\u{1b}[2J\u{1b}]0;pwned\u{7}\u{1b}[31mred\u{202e}\0\0 \u{1b}]");
        }
        let started = std::time::Instant::now();
        let shown = shown(&text);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(shown.starts_with("provider said: red\u{fffd} "), "{}", &shown[..40]);
        assert!(shown.ends_with(" bytes more]"));
        assert!(!shown.chars().any(|c| unshown(c) || c == ESC));
        // Quadratic behaviour would show here: a megabyte of openers.
        let openers = "\u{1b}]".repeat(1024 * 1024);
        let started = std::time::Instant::now();
        assert!(shown_len(&openers) <= DIAGNOSTIC_LIMIT);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    fn shown_len(text: &str) -> usize {
        diagnostic(text).len()
    }
}
