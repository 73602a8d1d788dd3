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
