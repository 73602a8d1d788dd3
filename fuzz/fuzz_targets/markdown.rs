//! The web client's Markdown parser (app/src/markdown/parse.rs, included
//! here on its own so the fuzzer needs no view types): any text parses
//! without panicking, nests no deeper than its bounds, and links only to
//! http(s) and mailto targets.
#![no_main]

#[path = "../../app/src/markdown/parse.rs"]
#[allow(dead_code)]
mod parse;

use libfuzzer_sys::fuzz_target;
use parse::{Kind, MAX_NESTING, Node, parse};

fn depth(nodes: &[Node]) -> usize {
    nodes
        .iter()
        .map(|node| match node {
            Node::Element { children, .. } => 1 + depth(children),
            _ => 1,
        })
        .max()
        .unwrap_or(0)
}

fn check_links(nodes: &[Node]) {
    for node in nodes {
        if let Node::Element { kind, href, children } = node {
            if let Some(href) = href {
                assert_eq!(*kind, Kind::Link);
                let lower = href.to_ascii_lowercase();
                assert!(
                    ["http://", "https://", "mailto:"]
                        .iter()
                        .any(|scheme| lower.starts_with(scheme)),
                    "{href:?}"
                );
            }
            check_links(children);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let tree = parse(text);
    // Blocks nest to twice the bound (a list item holds a list), inlines to
    // the bound, one inside the other.
    assert!(depth(&tree) <= 3 * MAX_NESTING + 3, "{}", depth(&tree));
    check_links(&tree);
});
