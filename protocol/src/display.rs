//! Text shown to a person who decides on it: a permission's prompt and
//! details, a question's title and options, a reason, a name, an alias.
//!
//! Such text is written by a model, a tool or a repository. Shown as is, a
//! bidi override or isolate (U+202A–U+202E, U+2066–U+2069) makes it read in
//! a different order from the one that runs, a zero-width character hides a
//! difference between two names, and a raw ESC or BEL reaches whatever
//! terminal shows it. So [`shown`] makes every such character visible as an
//! escape (`\u{202E}`) and says that it did; a client that shows the text
//! says so too ("contains hidden characters"). The exact bytes stay in the
//! message (a permission request's `input`, an option's value) for where a
//! person must act on them.
//!
//! Escaped: every control character but `\n`, `\t` and the `\r` of a
//! `\r\n`; DEL; the C1 controls; Unicode format characters (general
//! category Cf, tag characters included) and the line and paragraph
//! separators. Everything else is shown as it is.

use std::borrow::Cow;
use std::fmt::Write;

/// Text made display-safe by [`shown`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown<'a> {
    /// The text with every hidden character written as a visible escape.
    pub text: Cow<'a, str>,
    /// Whether the text held a hidden character.
    pub hidden: bool,
}

/// `text` with every character that would be invisible, or would change how
/// the rest reads, written as `\u{XXXX}`; unchanged (and not copied) when
/// it holds none.
pub fn shown(text: &str) -> Shown<'_> {
    if !text.char_indices().any(|(at, c)| hides(text, at, c)) {
        return Shown { text: Cow::Borrowed(text), hidden: holds_an_escape(text) };
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (at, c) in text.char_indices() {
        if hides(text, at, c) {
            let _ = write!(out, "\\u{{{:04X}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Shown { text: Cow::Owned(out), hidden: true }
}

/// Whether `text` holds the escape [`shown`] writes for a hidden
/// character: a question's text arrives escaped already (the daemon makes
/// what a person decides on display-safe for every client), and still
/// says that it hid something.
fn holds_an_escape(text: &str) -> bool {
    text.match_indices("\\u{").any(|(at, _)| {
        let rest = &text[at + 3..];
        let Some((hex, _)) = rest.split_once('}') else { return false };
        (1..=6).contains(&hex.len())
            && u32::from_str_radix(hex, 16)
                .ok()
                .and_then(char::from_u32)
                .is_some_and(crate::diagnostic::unshown)
    })
}

/// [`shown`]'s text, owned: for a reason or name built on the server.
pub fn escaped(text: &str) -> String {
    shown(text).text.into_owned()
}

/// Whether `text` holds a character [`shown`] would escape: a name or alias
/// that does is refused where it is chosen.
pub fn has_hidden(text: &str) -> bool {
    shown(text).hidden
}

/// What a diagnostic cannot show ([`crate::diagnostic`]), except the `\r`
/// of a `\r\n`, which shows as the line break it is.
fn hides(text: &str, at: usize, c: char) -> bool {
    match c {
        '\r' => text.as_bytes().get(at + 1) != Some(&b'\n'),
        _ => crate::diagnostic::unshown(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escaped_already_still_says_it_hid_something() {
        let once = shown("rm x #\u{202E}exe.txt");
        assert_eq!(once.text, "rm x #\\u{202E}exe.txt");
        let twice = shown(&once.text);
        assert!(matches!(twice.text, Cow::Borrowed(_)), "nothing is escaped twice");
        assert!(twice.hidden, "an escape of a hidden character is still flagged");
        assert!(!shown("a \\u{41} and \\u{zz} and \\u{").hidden, "not escapes of hidden ones");
    }

    #[test]
    fn clean_text_is_borrowed_and_not_flagged() {
        let text = "rm -rf build\n\techo done\r\nnaïve ✓ 日本語";
        let shown = shown(text);
        assert!(matches!(shown.text, Cow::Borrowed(_)));
        assert!(!shown.hidden);
    }

    #[test]
    fn bidi_controls_and_zero_width_become_visible_escapes() {
        let shown = shown("echo safe \u{202E}fdsa\u{202C}; \u{2066}x\u{2069}\u{200B}");
        assert!(shown.hidden);
        assert_eq!(shown.text, "echo safe \\u{202E}fdsa\\u{202C}; \\u{2066}x\\u{2069}\\u{200B}");
    }

    #[test]
    fn terminal_controls_and_tags_become_visible_escapes() {
        let shown = shown("a\u{1b}[2Jb\u{7}c\rd\u{7f}\u{85}\u{E0041}\u{2028}");
        assert_eq!(
            shown.text,
            "a\\u{001B}[2Jb\\u{0007}c\\u{000D}d\\u{007F}\\u{0085}\\u{E0041}\\u{2028}"
        );
        assert!(has_hidden("\u{feff}name") && !has_hidden("name"));
        assert_eq!(escaped("ok"), "ok");
    }
}
