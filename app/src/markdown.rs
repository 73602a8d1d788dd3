//! Markdown for agent output, rendered safely: the text is parsed into a
//! small tree and every piece becomes a DOM node through Leptos, so text is
//! always text. Raw HTML in the source is shown as text, never parsed; links
//! keep only http(s) and mailto targets. Agent output can inject no markup,
//! script or style.

use leptos::prelude::*;
use pulldown_cmark::{Event, Options, Parser, Tag};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
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

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Code(String),
    Break,
    Rule,
    Element { kind: Kind, href: Option<String>, children: Vec<Node> },
}

fn safe_href(url: &str) -> Option<String> {
    let lower = url.trim().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:"))
        .then(|| url.trim().to_owned())
}

fn parse(source: &str) -> Vec<Node> {
    let mut stack: Vec<(Kind, Option<String>, Vec<Node>)> = Vec::new();
    let mut root = Vec::new();
    let push = |stack: &mut Vec<(Kind, Option<String>, Vec<Node>)>,
                root: &mut Vec<Node>,
                node: Node| match stack.last_mut() {
        Some((_, _, children)) => children.push(node),
        None => root.push(node),
    };
    for event in Parser::new_ext(source, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(tag) => {
                let (kind, href) = match tag {
                    Tag::Paragraph => (Kind::Paragraph, None),
                    Tag::Heading { level, .. } => (Kind::Heading(level as u8), None),
                    Tag::BlockQuote(_) => (Kind::Quote, None),
                    Tag::CodeBlock(_) => (Kind::CodeBlock, None),
                    Tag::List(start) => (Kind::List(start.is_some()), None),
                    Tag::Item => (Kind::Item, None),
                    Tag::Emphasis => (Kind::Emphasis, None),
                    Tag::Strong => (Kind::Strong, None),
                    Tag::Strikethrough => (Kind::Strike, None),
                    Tag::Link { dest_url, .. } => (Kind::Link, safe_href(&dest_url)),
                    // Tables, images and the rest: their text still shows.
                    _ => (Kind::Paragraph, None),
                };
                stack.push((kind, href, Vec::new()));
            }
            Event::End(_) => {
                if let Some((kind, href, children)) = stack.pop() {
                    push(&mut stack, &mut root, Node::Element { kind, href, children });
                }
            }
            // Raw HTML is text here: shown, never interpreted.
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                push(&mut stack, &mut root, Node::Text(text.into_string()));
            }
            Event::Code(code) => push(&mut stack, &mut root, Node::Code(code.into_string())),
            Event::SoftBreak => push(&mut stack, &mut root, Node::Text(" ".to_owned())),
            Event::HardBreak => push(&mut stack, &mut root, Node::Break),
            Event::Rule => push(&mut stack, &mut root, Node::Rule),
            _ => {}
        }
    }
    while let Some((kind, href, children)) = stack.pop() {
        push(&mut stack, &mut root, Node::Element { kind, href, children });
    }
    root
}

fn render(nodes: Vec<Node>) -> AnyView {
    nodes
        .into_iter()
        .map(|node| match node {
            Node::Text(text) => text.into_any(),
            Node::Code(code) => view! { <code>{code}</code> }.into_any(),
            Node::Break => view! { <br/> }.into_any(),
            Node::Rule => view! { <hr/> }.into_any(),
            Node::Element { kind, href, children } => {
                let inner = render(children);
                match kind {
                    Kind::Paragraph => view! { <p>{inner}</p> }.into_any(),
                    Kind::Heading(1 | 2) => view! { <h3>{inner}</h3> }.into_any(),
                    Kind::Heading(_) => view! { <h4>{inner}</h4> }.into_any(),
                    Kind::Quote => view! { <blockquote>{inner}</blockquote> }.into_any(),
                    Kind::CodeBlock => view! { <pre><code>{inner}</code></pre> }.into_any(),
                    Kind::List(true) => view! { <ol>{inner}</ol> }.into_any(),
                    Kind::List(false) => view! { <ul>{inner}</ul> }.into_any(),
                    Kind::Item => view! { <li>{inner}</li> }.into_any(),
                    Kind::Emphasis => view! { <em>{inner}</em> }.into_any(),
                    Kind::Strong => view! { <strong>{inner}</strong> }.into_any(),
                    Kind::Strike => view! { <s>{inner}</s> }.into_any(),
                    Kind::Link => match href {
                        Some(href) => view! { <a href=href target="_blank" rel="noopener noreferrer">{inner}</a> }.into_any(),
                        None => view! { <span>{inner}</span> }.into_any(),
                    },
                }
            }
        })
        .collect_view()
        .into_any()
}

/// Markdown as safe DOM.
#[component]
pub fn Markdown(text: String) -> impl IntoView {
    view! { <div class="markdown">{render(parse(&text))}</div> }
}
