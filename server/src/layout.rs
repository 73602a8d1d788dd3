//! The daemon's folders depend on each other in one direction only: this
//! test reads every `crate::` path in the sources and fails on a cycle
//! between top-level modules, naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level module a source file belongs to (`web/ws.rs` → `web`).
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_owned())
}

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// Top-level modules named after `crate::` in `text`.
fn uses(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .filter_map(|(at, _)| {
            let rest = &text[at + "crate::".len()..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn the_daemons_folders_have_no_import_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let Some(module) = module_of(&root, file) else { continue };
        if module == "layout" {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read source");
        let used: Vec<String> = uses(&text).into_iter().filter(|used| *used != module).collect();
        graph.entry(module).or_default().extend(used);
    }
    assert!(graph.contains_key("agents") && graph.contains_key("clients"), "{graph:?}");
    // Depth-first search for a back edge.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            panic!("import cycle: {} -> {node}", path[at..].join(" -> "));
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(node.to_owned());
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, &graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn crate_paths_are_read() {
    let text = "use crate::web::x; fn f() { crate::agents::now_ms(); }";
    assert_eq!(uses(text), BTreeSet::from(["agents".to_owned(), "web".to_owned()]));
}
