//! The Markdown parser: text to a small tree of [`Node`]s, which the parent
//! module renders. Plain std code with no view types, so the fuzz target
//! (fuzz/) builds it alone.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Paragraph,
    Heading(u8),
    Quote,
    CodeBlock,
    List(bool),
    Item,
    Emphasis,
    Strong,
    Strike,
    Link,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Text(String),
    Code(String),
    Break,
    Rule,
    Element { kind: Kind, href: Option<String>, children: Vec<Node> },
}

fn element(kind: Kind, children: Vec<Node>) -> Node {
    Node::Element { kind, href: None, children }
}

fn safe_href(url: &str) -> Option<String> {
    let lower = url.trim().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:"))
        .then(|| url.trim().to_owned())
}

/// How deep blocks (quotes, list items) and, separately, inlines (emphasis,
/// links) nest before the rest is shown as text: the parser and the
/// renderer recurse, and a text of a hundred thousand `>` would otherwise
/// overflow the stack.
pub const MAX_NESTING: usize = 16;

pub fn parse(source: &str) -> Vec<Node> {
    let lines: Vec<&str> = source.lines().collect();
    blocks(&lines, 0)
}

// ---- blocks ----

/// Leading whitespace in columns (a tab counts four) and the rest.
fn indent(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches([' ', '\t']);
    let columns =
        line[..line.len() - rest.len()].chars().map(|c| if c == '\t' { 4 } else { 1 }).sum();
    (columns, rest)
}

/// `line` without its first `columns` columns of indentation (or all of it).
fn dedent(line: &str, columns: usize) -> &str {
    let mut taken = 0;
    for (at, c) in line.char_indices() {
        if taken >= columns || !matches!(c, ' ' | '\t') {
            return &line[at..];
        }
        taken += if c == '\t' { 4 } else { 1 };
    }
    ""
}

/// A code fence's character and length.
fn fence(text: &str) -> Option<(char, usize)> {
    let c = text.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let length = text.chars().take_while(|&d| d == c).count();
    (length >= 3 && !(c == '`' && text[length..].contains('`'))).then_some((c, length))
}

fn heading(text: &str) -> Option<(u8, &str)> {
    let level = text.chars().take_while(|&c| c == '#').count();
    let rest = &text[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    let closed = rest.trim_end_matches('#');
    let rest =
        if closed.is_empty() || closed.ends_with([' ', '\t']) { closed.trim_end() } else { rest };
    Some((level as u8, rest))
}

fn is_rule(text: &str) -> bool {
    let mut marks = text.chars().filter(|c| !matches!(c, ' ' | '\t'));
    match marks.next() {
        Some(mark @ ('-' | '*' | '_')) => {
            let rest: Vec<char> = marks.collect();
            rest.len() >= 2 && rest.iter().all(|&c| c == mark)
        }
        _ => false,
    }
}

/// A list marker: whether it is ordered, and the width of marker plus the
/// spaces after it (where the item's content starts).
fn list_marker(text: &str) -> Option<(bool, usize)> {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let (ordered, marker) = match text.as_bytes().get(digits) {
        Some(b'.' | b')') if (1..=9).contains(&digits) => (true, digits + 1),
        Some(b'-' | b'*' | b'+') if digits == 0 => (false, 1),
        _ => return None,
    };
    let rest = &text[marker..];
    if rest.is_empty() {
        return Some((ordered, marker + 1));
    }
    let spaces = rest.chars().take_while(|&c| c == ' ').count();
    match spaces {
        0 => None,
        1..=4 if spaces < rest.len() => Some((ordered, marker + spaces)),
        _ => Some((ordered, marker + 1)),
    }
}

/// Whether a line starts a block that ends a paragraph.
fn interrupts(text: &str) -> bool {
    fence(text).is_some()
        || heading(text).is_some()
        || text.starts_with('>')
        || is_rule(text)
        || list_marker(text).is_some_and(|(_, width)| width < text.len())
}

fn blocks(lines: &[&str], depth: usize) -> Vec<Node> {
    if depth >= MAX_NESTING {
        return vec![element(Kind::Paragraph, vec![Node::Text(lines.join("\n"))])];
    }
    let mut nodes = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let (columns, text) = indent(lines[at]);
        if text.is_empty() {
            flush(&mut paragraph, &mut nodes);
            at += 1;
            continue;
        }
        if !paragraph.is_empty() && !interrupts(text) {
            paragraph.push(text);
            at += 1;
            continue;
        }
        flush(&mut paragraph, &mut nodes);
        if let Some((mark, length)) = fence(text) {
            let mut code = Vec::new();
            at += 1;
            while at < lines.len() {
                let (_, inner) = indent(lines[at]);
                if fence(inner).is_some_and(|(c, l)| c == mark && l >= length)
                    && inner.trim_end().chars().all(|c| c == mark)
                {
                    at += 1;
                    break;
                }
                code.push(dedent(lines[at], columns));
                at += 1;
            }
            nodes.push(element(Kind::CodeBlock, vec![Node::Text(code.join("\n"))]));
        } else if let Some((level, title)) = heading(text) {
            nodes.push(element(Kind::Heading(level), inline(title, 0)));
            at += 1;
        } else if is_rule(text) {
            nodes.push(Node::Rule);
            at += 1;
        } else if text.starts_with('>') {
            let mut quoted = Vec::new();
            while let Some(rest) =
                lines.get(at).map(|line| indent(line).1).and_then(|t| t.strip_prefix('>'))
            {
                quoted.push(rest.strip_prefix(' ').unwrap_or(rest));
                at += 1;
            }
            nodes.push(element(Kind::Quote, blocks(&quoted, depth + 1)));
        } else if let Some((ordered, _)) = list_marker(text) {
            at = list(lines, at, ordered, depth, &mut nodes);
        } else {
            paragraph.push(text);
            at += 1;
        }
    }
    flush(&mut paragraph, &mut nodes);
    nodes
}

/// One list from `lines[start]`, a marker line; returns where it ends.
fn list(lines: &[&str], start: usize, ordered: bool, depth: usize, nodes: &mut Vec<Node>) -> usize {
    let mut items = Vec::new();
    let mut at = start;
    while let Some((columns, text)) = lines.get(at).map(|line| indent(line)) {
        let Some((_, width)) = list_marker(text).filter(|&(kind, _)| kind == ordered) else {
            break;
        };
        let content = columns + width;
        let mut item = vec![text.get(width..).unwrap_or_default()];
        at += 1;
        while let Some(&line) = lines.get(at) {
            let (inner, rest) = indent(line);
            if rest.is_empty() {
                // A blank line stays in the item only if the item goes on.
                let next = lines[at..].iter().position(|line| !line.trim().is_empty());
                match next.map(|offset| indent(lines[at + offset]).0) {
                    Some(next) if next >= content => item.push(""),
                    _ => break,
                }
            } else if inner >= content {
                item.push(dedent(line, content));
            } else if interrupts(rest) || item.last().is_some_and(|last| last.is_empty()) {
                break;
            } else {
                item.push(rest);
            }
            at += 1;
        }
        let mut children = blocks(&item, depth + 1);
        // A one-paragraph item shows as its text (a tight list).
        if let [Node::Element { kind: Kind::Paragraph, children: text, .. }] =
            children.as_mut_slice()
        {
            children = std::mem::take(text);
        }
        items.push(element(Kind::Item, children));
        if lines.get(at).is_some_and(|line| line.trim().is_empty()) {
            at += 1;
        }
    }
    nodes.push(element(Kind::List(ordered), items));
    at
}

fn flush(paragraph: &mut Vec<&str>, nodes: &mut Vec<Node>) {
    if paragraph.is_empty() {
        return;
    }
    let mut children = Vec::new();
    let last = paragraph.len() - 1;
    for (index, line) in paragraph.drain(..).enumerate() {
        let line = line.strip_suffix('\\').unwrap_or_else(|| line.trim_end());
        children.extend(inline(line, 0));
        // Every line break is kept, not only CommonMark's hard ones: agents
        // write lines (a command's output, a list without markers) that
        // read as one run-on line when joined.
        if index < last {
            children.push(Node::Break);
        }
    }
    nodes.push(element(Kind::Paragraph, children));
}

// ---- inlines ----

/// The longest link label and target looked for, so that a text of many
/// unclosed `[` stays linear.
const LINK_SCAN: usize = 2048;

fn inline(text: &str, depth: usize) -> Vec<Node> {
    if depth >= MAX_NESTING {
        return vec![Node::Text(text.to_owned())];
    }
    Inlines { text, depth, misses: Vec::new() }.parse()
}

/// One run of inline text. A search for a closing delimiter that found none
/// from some point finds none from any later point either, so each miss is
/// remembered and a text of many unclosed delimiters parses in linear time.
struct Inlines<'a> {
    text: &'a str,
    depth: usize,
    /// `(delimiter, run width, from)`: no closer after `from`.
    misses: Vec<(char, usize, usize)>,
}

impl Inlines<'_> {
    fn parse(mut self) -> Vec<Node> {
        let text = self.text;
        let mut nodes = Vec::new();
        let mut plain = String::new();
        let mut at = 0;
        while let Some(c) = text[at..].chars().next() {
            if let Some((node, end)) = self.special(at, c) {
                if !plain.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut plain)));
                }
                nodes.push(node);
                at = end;
                continue;
            }
            let mut length = c.len_utf8();
            match c {
                '\\' => match text[at + 1..].chars().next().filter(char::is_ascii_punctuation) {
                    Some(escaped) => {
                        plain.push(escaped);
                        length += escaped.len_utf8();
                    }
                    None => plain.push('\\'),
                },
                '&' => match reference(&text[at..]) {
                    Some((decoded, reference)) => {
                        plain.push(decoded);
                        length = reference;
                    }
                    None => plain.push('&'),
                },
                // A delimiter run that opened nothing stays text, whole.
                '`' | '*' | '_' | '~' => {
                    length = run_length(text, at, c);
                    plain.push_str(&text[at..at + length]);
                }
                c => plain.push(c),
            }
            at += length;
        }
        if !plain.is_empty() {
            nodes.push(Node::Text(plain));
        }
        nodes
    }

    /// A code span, emphasis, strike, link or autolink starting at `at`,
    /// and where it ends.
    fn special(&mut self, at: usize, c: char) -> Option<(Node, usize)> {
        let text = self.text;
        let rest = &text[at..];
        match c {
            '`' => {
                let run = run_length(text, at, '`');
                let close = self.closer(at + run, '`', run, |_, _| true)?;
                let code = &text[at + run..close];
                let code = match code.strip_prefix(' ').and_then(|c| c.strip_suffix(' ')) {
                    Some(inner) if !inner.trim().is_empty() => inner,
                    _ => code,
                };
                Some((Node::Code(code.to_owned()), close + run))
            }
            '*' | '_' | '~' => {
                let run = run_length(text, at, c);
                let before = text[..at].chars().next_back();
                if c == '_' && before.is_some_and(char::is_alphanumeric) {
                    return None;
                }
                let kind = match (c, run) {
                    ('~', 2) => Kind::Strike,
                    ('~', _) => return None,
                    (_, 1) => Kind::Emphasis,
                    (_, 2 | 3) => Kind::Strong,
                    _ => return None,
                };
                let open = at + run;
                if text[open..].chars().next().is_none_or(char::is_whitespace) {
                    return None;
                }
                let close = self.closer(open, c, run, |before, after| {
                    let inside_word = c == '_' && after.is_some_and(char::is_alphanumeric);
                    !before.is_whitespace() && !inside_word
                })?;
                let mut children = inline(&text[open..close], self.depth + 1);
                if run == 3 {
                    children = vec![element(Kind::Emphasis, children)];
                }
                Some((element(kind, children), close + run))
            }
            '[' => {
                let label = matching(rest, '[', ']')?;
                let after = &rest[label + 1..];
                let target = matching(after.strip_prefix('(').map(|_| after)?, '(', ')')?;
                let inside = after[1..target].trim();
                let url = inside.split_once([' ', '\t']).map_or(inside, |(url, _)| url);
                let url = url.strip_prefix('<').and_then(|u| u.strip_suffix('>')).unwrap_or(url);
                let node = Node::Element {
                    kind: Kind::Link,
                    href: safe_href(url),
                    children: inline(&rest[1..label], self.depth + 1),
                };
                Some((node, at + label + 1 + target + 1))
            }
            '<' => {
                let end = rest[..rest.len().min(LINK_SCAN)].find('>')?;
                let url = &rest[1..end];
                let href = safe_href(url).filter(|_| !url.contains(char::is_whitespace))?;
                let children = vec![Node::Text(url.to_owned())];
                Some((Node::Element { kind: Kind::Link, href: Some(href), children }, at + end + 1))
            }
            _ => None,
        }
    }

    /// Where the first run of exactly `width` `c`s after `from` whose
    /// neighbours pass `fits` starts.
    fn closer(
        &mut self,
        from: usize,
        c: char,
        width: usize,
        fits: impl Fn(char, Option<char>) -> bool,
    ) -> Option<usize> {
        let text = self.text;
        if self.misses.iter().any(|&(d, w, after)| d == c && w == width && after <= from) {
            return None;
        }
        let mut at = from;
        while let Some(offset) = text[at..].find(c) {
            let start = at + offset;
            let run = run_length(text, start, c);
            let before = text[..start].chars().next_back();
            let after = text[start + run..].chars().next();
            if run == width && before.is_some_and(|before| fits(before, after)) {
                return Some(start);
            }
            at = start + run;
        }
        self.misses.push((c, width, from));
        None
    }
}

fn run_length(text: &str, at: usize, c: char) -> usize {
    text[at..].chars().take_while(|&d| d == c).count() * c.len_utf8()
}

/// The index of the bracket closing the one `text` opens with, looked for
/// within [`LINK_SCAN`] bytes.
fn matching(text: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0;
    let mut escaped = false;
    for (at, c) in text.char_indices().take_while(|&(at, _)| at < LINK_SCAN) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;` and numeric
/// references: the character and the reference's length.
fn reference(text: &str) -> Option<(char, usize)> {
    // Bytes, not a slice: the twelfth byte may fall inside a character.
    let end = text.bytes().take(12).position(|byte| byte == b';')?;
    let name = &text[1..end];
    let decoded = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code).filter(|&c| c != '\0')?
        }
    };
    Some((decoded, end + 1))
}
