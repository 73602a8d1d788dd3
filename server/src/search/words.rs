//! The user's text as an FTS5 query, and FTS5's snippet as the wire's
//! pieces. A query is plain words: each becomes a quoted FTS5 string (a
//! `"` inside doubled), so no character a person types is FTS5 syntax,
//! and `NEAR`, `AND`, `*` or `-` are words like any other (or nothing,
//! when they hold no letter or digit). Every word must occur; the last one
//! may be the start of a word, so a query typed so far finds what it will.

use shard_protocol::search::SnippetPart;

/// Words of one query at most; more say nothing a person means.
pub const MAX_WORDS: usize = 32;

/// Where a match starts and ends in a snippet FTS5 returns: control
/// characters that indexed text never holds ([`indexable`]).
pub const HIT_START: char = '\u{2}';
pub const HIT_END: char = '\u{3}';

/// The FTS5 `MATCH` expression for `text`, or `None` when it holds no
/// word (no letter or digit): such a query could only match nothing.
/// Control characters part words, as they do in indexed text.
pub fn expression(text: &str) -> Option<String> {
    let text = indexable(text);
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .take(MAX_WORDS)
        .collect();
    let last = words.len().checked_sub(1)?;
    let quoted: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(at, word)| {
            let quoted = format!("\"{}\"", word.replace('"', "\"\""));
            if at == last { quoted + "*" } else { quoted }
        })
        .collect();
    Some(quoted.join(" "))
}

/// `text` as it is indexed: the snippet markers and every other control
/// character but line breaks and tabs become spaces.
pub fn indexable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() && !matches!(c, '\n' | '\t') { ' ' } else { c })
        .collect()
}

/// A snippet with [`HIT_START`]/[`HIT_END`] markers as pieces, runs of
/// white space made one space (a snippet is one line).
pub fn snippet_parts(snippet: &str) -> Vec<SnippetPart> {
    let mut parts = Vec::new();
    let mut hit = false;
    let mut text = String::new();
    for c in snippet.chars() {
        match c {
            HIT_START | HIT_END => {
                if !text.is_empty() {
                    parts.push(SnippetPart { text: std::mem::take(&mut text), hit });
                }
                hit = c == HIT_START;
            }
            c if c.is_whitespace() => {
                if !text.ends_with(' ') {
                    text.push(' ');
                }
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        parts.push(SnippetPart { text, hit });
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_quoted_and_syntax_is_only_words() {
        assert_eq!(expression("deploy script").as_deref(), Some("\"deploy\" \"script\"*"));
        assert_eq!(expression("say \"hi\"").as_deref(), Some("\"say\" \"\"\"hi\"\"\"*"));
        assert_eq!(expression("a NEAR b").as_deref(), Some("\"a\" \"NEAR\" \"b\"*"));
        assert_eq!(expression("-x* OR y").as_deref(), Some("\"-x*\" \"OR\" \"y\"*"));
        for nothing in ["", "   ", "* - \" ( )", "\u{2603}"] {
            assert_eq!(expression(nothing), None, "{nothing:?}");
        }
        let many = "word ".repeat(100);
        assert_eq!(expression(&many).map(|e| e.matches("word").count()), Some(MAX_WORDS));
    }

    #[test]
    fn a_snippet_becomes_pieces_with_its_hits_marked() {
        let parts = snippet_parts("…the \u{2}deploy\u{3}  script\nruns \u{2}here\u{3}");
        let shown: Vec<(&str, bool)> = parts.iter().map(|p| (p.text.as_str(), p.hit)).collect();
        assert_eq!(
            shown,
            [("…the ", false), ("deploy", true), (" script runs ", false), ("here", true)]
        );
        assert_eq!(indexable("a\u{2}b\u{0}c\nd\te"), "a b c\nd\te");
    }
}
