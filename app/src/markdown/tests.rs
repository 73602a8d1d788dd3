//! The parser's tree for the Markdown agents write, and the guarantees that
//! make it safe: raw HTML is text, only http(s) and mailto links link.

use super::{Kind, Node, parse};

/// A compact picture of a tree: `p(Hello, em(world))`.
fn show(nodes: &[Node]) -> String {
    nodes.iter().map(show_one).collect::<Vec<_>>().join(", ")
}

fn show_one(node: &Node) -> String {
    match node {
        Node::Text(text) => format!("{text:?}"),
        Node::Code(code) => format!("code({code:?})"),
        Node::Break => "br".to_owned(),
        Node::Rule => "hr".to_owned(),
        Node::Element { kind, href, children } => {
            let name = match kind {
                Kind::Paragraph => "p".to_owned(),
                Kind::Heading(level) => format!("h{level}"),
                Kind::Quote => "quote".to_owned(),
                Kind::CodeBlock => "pre".to_owned(),
                Kind::List(true) => "ol".to_owned(),
                Kind::List(false) => "ul".to_owned(),
                Kind::Item => "li".to_owned(),
                Kind::Emphasis => "em".to_owned(),
                Kind::Strong => "strong".to_owned(),
                Kind::Strike => "s".to_owned(),
                Kind::Link => format!("a[{}]", href.as_deref().unwrap_or("-")),
            };
            format!("{name}({})", show(children))
        }
    }
}

fn md(source: &str) -> String {
    show(&parse(source))
}

#[test]
fn paragraphs_keep_their_line_breaks_and_split_at_blank_lines() {
    // A reply's lines stay lines (a command's output quoted in it).
    assert_eq!(md("one\ntwo\n\nthree"), r#"p("one", br, "two"), p("three")"#);
    assert_eq!(
        md("exit code 0\ntotal 8\ndrwxr-xr-x 2 me me"),
        r#"p("exit code 0", br, "total 8", br, "drwxr-xr-x 2 me me")"#
    );
    assert_eq!(md("hard  \nbreak\\\nagain"), r#"p("hard", br, "break", br, "again")"#);
    assert_eq!(md(""), "");
}

#[test]
fn headings_rules_quotes_and_fenced_code() {
    assert_eq!(md("# Title\n## Sub ##\n#### Deep"), r#"h1("Title"), h2("Sub"), h4("Deep")"#);
    assert_eq!(md("#hashtag"), r##"p("#hashtag")"##);
    assert_eq!(md("a\n---\n* * *"), r#"p("a"), hr, hr"#);
    assert_eq!(
        md("> quoted **bold**\n> more"),
        r#"quote(p("quoted ", strong("bold"), br, "more"))"#
    );
    assert_eq!(
        md("```rust\nfn main() {\n    *x = 1;\n}\n```\nafter"),
        r#"pre("fn main() {\n    *x = 1;\n}"), p("after")"#
    );
    assert_eq!(md("~~~\nunclosed"), r#"pre("unclosed")"#);
}

#[test]
fn lists_nest_by_indentation_and_end_at_a_paragraph() {
    assert_eq!(
        md("- one\n- two\n  - inner\n- three"),
        r#"ul(li("one"), li(p("two"), ul(li("inner"))), li("three"))"#
    );
    assert_eq!(md("1. first\n2. second\n\nafter"), r#"ol(li("first"), li("second")), p("after")"#);
    assert_eq!(md("text\n- item"), r#"p("text"), ul(li("item"))"#);
    assert_eq!(md("- a\n  continued\n- b"), r#"ul(li("a", br, "continued"), li("b"))"#);
}

#[test]
fn inline_code_emphasis_strong_and_strike() {
    assert_eq!(md("a `b *c*` d"), r#"p("a ", code("b *c*"), " d")"#);
    assert_eq!(md("``a ` b``"), r#"p(code("a ` b"))"#);
    assert_eq!(
        md("*em* **strong** ***both*** ~~gone~~"),
        r#"p(em("em"), " ", strong("strong"), " ", strong(em("both")), " ", s("gone"))"#
    );
    assert_eq!(md("*a **b** c*"), r#"p(em("a ", strong("b"), " c"))"#);
    assert_eq!(md("snake_case_name and __init__"), r#"p("snake_case_name and ", strong("init"))"#);
    assert_eq!(md("2 * 3 * 4, a*, *b"), r#"p("2 * 3 * 4, a*, *b")"#);
    assert_eq!(md("\\*not em\\* \\`x\\`"), r#"p("*not em* `x`")"#);
    assert_eq!(md("&lt;tag&gt; &amp; &#65;&#x42; &bogus;"), r#"p("<tag> & AB &bogus;")"#);
}

#[test]
fn links_keep_only_web_and_mail_targets() {
    assert_eq!(
        md("[docs](https://example.com/a_(b))"),
        r#"p(a[https://example.com/a_(b)]("docs"))"#
    );
    assert_eq!(
        md("[x](http://h \"title\") <mailto:me@h>"),
        r#"p(a[http://h]("x"), " ", a[mailto:me@h]("mailto:me@h"))"#
    );
    assert_eq!(md("[click](javascript:alert(1))"), r#"p(a[-]("click"))"#);
    assert_eq!(
        md("[data](data:text/html,hi) <javascript:x>"),
        r#"p(a[-]("data"), " <javascript:x>")"#
    );
    assert_eq!(md("[not a link] (x)"), r#"p("[not a link] (x)")"#);
}

#[test]
fn raw_html_is_only_ever_text() {
    assert_eq!(md("<script>alert(1)</script>"), r#"p("<script>alert(1)</script>")"#);
    assert_eq!(md("<img src=x onerror=alert(1)>"), r#"p("<img src=x onerror=alert(1)>")"#);
}

#[test]
fn unclosed_delimiters_in_a_long_text_parse_in_linear_time() {
    // Quadratic scanning would take minutes here; a miss is remembered.
    let text = format!("`{}", "*a [b _c <d ~~e ".repeat(30_000));
    let started = std::time::Instant::now();
    let nodes = parse(&text);
    assert_eq!(nodes.len(), 1);
    let Node::Element { children, .. } = &nodes[0] else { panic!("not a paragraph") };
    let Node::Text(text_back) = &children[0] else { panic!("not text") };
    assert_eq!(text_back.len(), text.trim_end().len());
    assert!(started.elapsed().as_secs() < 20, "took {:?}", started.elapsed());
}

fn depth(nodes: &[Node]) -> usize {
    nodes
        .iter()
        .map(|node| match node {
            Node::Element { children, .. } => 1 + depth(children),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn nesting_stops_at_a_depth_and_the_rest_stays_text() {
    use super::parse::MAX_NESTING;
    // Each of these recursed once per level: deep enough to overflow a stack.
    let quotes = parse(&format!("{} deep", ">".repeat(100_000)));
    assert_eq!(depth(&quotes), MAX_NESTING + 1, "the quotes, then a paragraph");
    assert!(show(&quotes).contains("deep"));
    let lists: String = (0..500).map(|level| format!("{}- item\n", "  ".repeat(level))).collect();
    assert!(depth(&parse(&lists)) <= 2 * MAX_NESTING + 2);
    let links = format!("{}x{}", "[".repeat(1_000), "](https://h)".repeat(1_000));
    assert!(depth(&parse(&links)) <= MAX_NESTING + 1);
    let emphasis = format!("{}x{}", "*a _".repeat(10_000), "_ a*".repeat(10_000));
    let tree = parse(&emphasis);
    assert!(depth(&tree) <= MAX_NESTING + 1, "{}", depth(&tree));
    assert!(show(&tree).contains('x'));
}

#[test]
fn a_reference_whose_twelfth_byte_is_inside_a_character_is_text() {
    // Found by fuzz/markdown: the scan for `;` sliced the text at byte 12,
    // which panicked (and would have taken the page down) when that byte
    // fell inside a character.
    let text = "&aaaaaaaaaa\u{bf}; and &pm ;x9Xxu:\u{bf}> deeper";
    assert_eq!(show(&parse(text)), format!("p({text:?})"));
}

#[test]
fn a_question_s_code_spans_are_cut_out_and_lone_backticks_stay() {
    use super::{code_spans, untick};
    assert_eq!(
        code_spans("Run `echo hi`? or `ls`"),
        [(false, "Run "), (true, "echo hi"), (false, "? or "), (true, "ls")]
    );
    assert_eq!(code_spans("a ` lone one"), [(false, "a ` lone one")]);
    assert_eq!(code_spans("``"), [(false, "``")]);
    assert_eq!(untick("Run `rm -rf x`?"), "Run rm -rf x?");
}
