//! Markdown for agent output, rendered safely: the text is parsed into a
//! small tree and every piece becomes a DOM node through Leptos, so text is
//! always text. Raw HTML in the source is shown as text, never parsed; links
//! keep only http(s) and mailto targets. Agent output can inject no markup,
//! script or style.
//!
//! The parser is this module's own, for the part of CommonMark that agents
//! write: ATX headings, fenced code, block quotes, bullet and ordered lists
//! (nested by indentation), thematic breaks and paragraphs; code spans,
//! emphasis, strong, `~~strike~~`, inline links, `<autolinks>`, backslash
//! escapes, hard breaks and the common character references. Anything else
//! stays as the text it is. `pulldown-cmark` did all of CommonMark but was a
//! sixth of the browser bundle on its own (52 KB of 322 KB brotli; see
//! docs/PERFORMANCE.md, "The browser bundle"), over a budget of 300 KB.

use leptos::either::Either;
use leptos::html::custom;
use leptos::prelude::*;

use self::parse::{Kind, Node, parse};

mod parse;

/// `text` cut at its code spans: `(true, code)` for what was between a
/// pair of backticks, `(false, text)` for the rest; a backtick without a
/// pair stays as it is. For a question's one line, where only the code
/// spans an agent writes ("Run `ls`?") are worth showing as code, and any
/// other markdown would change what the agent asked.
pub fn code_spans(text: &str) -> Vec<(bool, &str)> {
    let mut spans = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let Some(length) = rest[open + 1..].find('`') else { break };
        let close = open + 1 + length;
        if length == 0 {
            // An empty pair is two backticks of text.
            spans.push((false, &rest[..close + 1]));
        } else {
            if open > 0 {
                spans.push((false, &rest[..open]));
            }
            spans.push((true, &rest[open + 1..close]));
        }
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        spans.push((false, rest));
    }
    spans
}

/// A question's line, its code spans as code.
#[component]
pub fn Ticked(#[prop(into)] text: String) -> impl IntoView {
    code_spans(&text)
        .into_iter()
        .map(|(code, span)| match code {
            true => Either::Left(view! { <code>{span.to_owned()}</code> }),
            false => Either::Right(span.to_owned()),
        })
        .collect_view()
}

/// `text` without the backticks of its code spans: for where no markup
/// shows (a notification).
#[cfg(any(feature = "hydrate", test))]
pub fn untick(text: &str) -> String {
    code_spans(text).into_iter().map(|(_, span)| span).collect()
}

fn tag(kind: Kind) -> &'static str {
    match kind {
        Kind::Paragraph => "p",
        Kind::Heading(1 | 2) => "h3",
        Kind::Heading(_) => "h4",
        Kind::Quote => "blockquote",
        Kind::CodeBlock => "pre",
        Kind::List(true) => "ol",
        Kind::List(false) => "ul",
        Kind::Item => "li",
        Kind::Emphasis => "em",
        Kind::Strong => "strong",
        Kind::Strike => "s",
        Kind::Link => "a",
    }
}

/// Every node as one element type with a dynamic tag, so that the bundle
/// holds one view type for all of them rather than one per tag.
fn render(nodes: Vec<Node>) -> AnyView {
    nodes
        .into_iter()
        .map(|node| {
            let (name, href, inner) = match node {
                Node::Text(text) => return Either::Left(text),
                Node::Code(code) => ("code", None, code.into_any()),
                Node::Break => ("br", None, ().into_any()),
                Node::Rule => ("hr", None, ().into_any()),
                Node::Element { kind: Kind::CodeBlock, children, .. } => {
                    ("pre", None, dynamic("code", None, render(children)).into_any())
                }
                // A link whose target was refused keeps its text, unlinked.
                Node::Element { kind: Kind::Link, href: None, children } => {
                    ("span", None, render(children))
                }
                Node::Element { kind, href, children } => (tag(kind), href, render(children)),
            };
            Either::Right(dynamic(name, href, inner))
        })
        .collect_view()
        .into_any()
}

fn dynamic(name: &'static str, href: Option<String>, inner: AnyView) -> impl IntoView {
    let external = href.is_some();
    custom(name)
        .attr("href", href)
        .attr("target", external.then_some("_blank"))
        .attr("rel", external.then_some("noopener noreferrer"))
        .child(inner)
}

/// Markdown as safe DOM.
#[component]
pub fn Markdown(text: String) -> impl IntoView {
    view! { <div class="markdown">{render(parse(&text))}</div> }
}

#[cfg(test)]
mod tests;
