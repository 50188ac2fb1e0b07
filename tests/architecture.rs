//! The crate's structure, checked: imports between the top-level modules of `src/` run one way
//! (no cycle), the simulator's engine imports nothing else of the crate, and no source file
//! grows past the size the project allows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::toposort;
use petgraph::graph::DiGraph;

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file of `src/` belongs to (`main.rs` and `cli/` are the command line).
fn module_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    if name == "main" { "cli".into() } else { name }
}

/// The first path segment of every `crate::…` (or, in the binary, `topoplace::…`) path in
/// `code`, including each member of a `crate::{a, b::c}` group.
fn referenced_modules(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The group's text at depth 1 only (nested groups dropped), split at its commas.
            let mut depth = 1;
            let mut top = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ if depth == 1 => top.push(c),
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
            for item in top.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Code without line comments (doc links are not imports).
fn without_comments(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// module → the other top-level modules it names.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src()).unwrap().to_path_buf();
        if relative == Path::new("lib.rs") {
            continue;
        }
        let module = module_of(&relative);
        let code = without_comments(&std::fs::read_to_string(&file).unwrap());
        let prefix = if module == "cli" {
            "topoplace::"
        } else {
            "crate::"
        };
        let mut used = referenced_modules(&code, prefix);
        if relative.components().count() == 1 && module != "cli" {
            used.extend(referenced_modules(&code, "super::"));
        }
        // `crate::Result` and the like are the crate root's re-exports of `error`.
        let used: BTreeSet<String> = used
            .into_iter()
            .map(|m| {
                if m.starts_with(char::is_uppercase) {
                    "error".to_string()
                } else {
                    m
                }
            })
            .filter(|m| *m != module && m != "cli")
            .collect();
        graph.entry(module).or_default().extend(used);
    }
    graph
}

#[test]
fn top_level_modules_import_one_way() {
    let graph = import_graph();
    let names: Vec<&String> = graph.keys().collect();
    let mut g = DiGraph::<&str, ()>::new();
    let nodes: BTreeMap<&str, _> = names
        .iter()
        .map(|n| (n.as_str(), g.add_node(n.as_str())))
        .collect();
    for (module, used) in &graph {
        for other in used {
            let target = nodes.get(other.as_str()).unwrap_or_else(|| {
                panic!("{module} names crate::{other}, which is not a module of src/")
            });
            g.add_edge(nodes[module.as_str()], *target, ());
        }
    }
    if let Err(cycle) = toposort(&g, None) {
        let at = g[cycle.node_id()];
        let shown: Vec<String> = graph
            .iter()
            .map(|(m, used)| {
                format!(
                    "{m} -> {}",
                    used.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        panic!("an import cycle runs through {at}:\n{}", shown.join("\n"));
    }
}

#[test]
fn the_simulator_engine_imports_nothing_of_the_crate() {
    let graph = import_graph();
    assert_eq!(
        graph["sim"],
        BTreeSet::new(),
        "sim must stay a leaf the compiler targets"
    );
}

#[test]
fn the_layers_named_in_the_design_run_one_way() {
    // Each module may import only modules of earlier layers (or of its own layer, acyclically).
    let layers: [&[&str]; 9] = [
        &["error", "units", "report", "assets", "sim", "checksum"],
        &[
            "graph", "cluster", "zoo", "import", "cost", "inputs", "milp",
        ],
        &["group", "inspect"],
        &["strategy", "sfb"],
        &["compile"],
        &["evaluate"],
        &[
            "gnn",
            "mcts",
            "solve",
            "baselines",
            "place_summary",
            "data_parallel",
            "pipeline_plan",
        ],
        &["train", "experiment", "headroom", "fidelity"],
        &["cli"],
    ];
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    for (module, used) in import_graph() {
        let mine = layer_of(&module).unwrap_or_else(|| panic!("module {module} is in no layer"));
        for other in used {
            let theirs =
                layer_of(&other).unwrap_or_else(|| panic!("module {other} is in no layer"));
            assert!(
                theirs <= mine,
                "{module} (layer {mine}) imports {other} (layer {theirs})"
            );
        }
    }
}

#[test]
fn source_files_stay_small() {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    for file in files {
        let lines = std::fs::read_to_string(&file).unwrap().lines().count();
        let limit = if file.ends_with("main.rs") { 150 } else { 600 };
        assert!(
            lines <= limit,
            "{} has {lines} lines (at most {limit})",
            file.display()
        );
    }
}

#[test]
fn the_reference_parser_sees_groups_and_plain_paths() {
    let code = "use crate::{a, b::{c, d}, e::f};\nlet x = crate::g::h();\nuse notcrate::z;";
    let found: Vec<String> = referenced_modules(code, "crate::").into_iter().collect();
    assert_eq!(found, ["a", "b", "e", "g"]);
}
