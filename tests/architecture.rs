//! The crate's structure, checked against its documentation: the layers of
//! docs/architecture.md are read from its table and enforced (a module imports only modules of
//! its own layer or the layers above it), imports between the top-level modules of `src/` run
//! one way, so do imports between the files of every folder, the simulator's engine imports
//! nothing else of the crate, the model-parallel decision is not made inside the compiler, and
//! docs/layout.md names every source file.

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

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn src() -> PathBuf {
    root().join("src")
}

/// Every source file, relative to `src/`, sorted.
fn relative_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    let mut relative: Vec<PathBuf> = files
        .into_iter()
        .map(|f| f.strip_prefix(src()).unwrap().to_path_buf())
        .collect();
    relative.sort();
    relative
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

/// The first segment after `prefix` of every path in `code` that starts with it, including each
/// member of a `prefix{a, b::c}` group.
fn referenced_modules(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                out.insert(item);
            }
        } else {
            let name = identifier_at(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// The leading identifier of `text`.
fn identifier_at(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first identifier of each comma-separated item of a `{…}` group whose text (after the
/// opening brace) is `group`, at depth 1 only.
fn top_level_items(group: &str) -> Vec<String> {
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
    top.split(',')
        .map(|item| identifier_at(item.trim()))
        .filter(|name| !name.is_empty())
        .collect()
}

/// Whether `path` is a unit-test file (`tests.rs`, or a file under a `tests/` folder of `src/`),
/// compiled only under `cfg(test)`: tests may use any module, so they take no part in the order.
fn is_unit_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "tests.rs")
        || path
            .strip_prefix(src())
            .unwrap_or(path)
            .components()
            .any(|c| c.as_os_str() == "tests")
}

/// Code without line comments (doc links are not imports) and without the unit tests at its
/// end or in their own files (a test module may use what any module offers).
fn code_of(path: &Path) -> String {
    if is_unit_test_file(path) {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let code: Vec<&str> = text
        .lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect();
    code.join("\n")
}

/// module → the other top-level modules it names.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for relative in relative_sources() {
        if relative == Path::new("lib.rs") {
            continue;
        }
        let module = module_of(&relative);
        let code = code_of(&src().join(&relative));
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

/// A cycle of `graph`, as the names along it, if it has one.
fn a_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    let mut g = DiGraph::<&str, ()>::new();
    let mut nodes = BTreeMap::new();
    for name in graph.keys().chain(graph.values().flatten()) {
        nodes
            .entry(name.as_str())
            .or_insert_with(|| g.add_node(name.as_str()));
    }
    for (from, used) in graph {
        for to in used {
            g.add_edge(nodes[from.as_str()], nodes[to.as_str()], ());
        }
    }
    let at = toposort(&g, None).err()?.node_id();
    let shown: Vec<String> = graph
        .iter()
        .filter(|(_, used)| !used.is_empty())
        .map(|(m, used)| {
            let used: Vec<&str> = used.iter().map(String::as_str).collect();
            format!("{m} -> {}", used.join(", "))
        })
        .collect();
    Some(format!("through {}:\n{}", g[at], shown.join("\n")))
}

#[test]
fn top_level_modules_import_one_way() {
    let graph = import_graph();
    for (module, used) in &graph {
        for other in used {
            assert!(
                graph.contains_key(other) || other == "error",
                "{module} names crate::{other}, which is not a module of src/"
            );
        }
    }
    if let Some(cycle) = a_cycle(&graph) {
        panic!("an import cycle runs {cycle}");
    }
}

/// A folder of `src/` (relative) and the names of its child modules, each with its file.
fn folders() -> BTreeMap<PathBuf, BTreeMap<String, PathBuf>> {
    let mut out: BTreeMap<PathBuf, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for relative in relative_sources() {
        let Some(folder) = relative.parent().filter(|p| !p.as_os_str().is_empty()) else {
            continue;
        };
        let name = relative.file_stem().unwrap().to_string_lossy().to_string();
        if name != "mod" {
            out.entry(folder.to_path_buf())
                .or_default()
                .insert(name, relative.clone());
        }
    }
    // A child that is a folder itself (`zoo/builder.rs` with `zoo/builder/`, or `cli/bench/`).
    let nested: Vec<PathBuf> = out.keys().cloned().collect();
    for folder in nested {
        let (Some(parent), Some(name)) = (folder.parent(), folder.file_name()) else {
            continue;
        };
        if parent.as_os_str().is_empty() {
            continue;
        }
        let name = name.to_string_lossy().to_string();
        let face = if src().join(&folder).join("mod.rs").exists() {
            folder.join("mod.rs")
        } else {
            parent.join(format!("{name}.rs"))
        };
        out.entry(parent.to_path_buf())
            .or_default()
            .insert(name, face);
    }
    out
}

/// The file that declares a folder's children (`mod.rs`, or `name.rs` beside `name/`).
fn face_of(folder: &Path) -> PathBuf {
    let in_folder = src().join(folder).join("mod.rs");
    if in_folder.exists() {
        return in_folder;
    }
    let name = folder.file_name().unwrap().to_string_lossy();
    src()
        .join(folder.parent().unwrap())
        .join(format!("{name}.rs"))
}

/// Item → the child module a folder's face re-exports it from (`pub use child::{A, B};`).
fn reexports(face: &Path, children: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    let code = code_of(face);
    let mut out = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(at) = statement.find("use ") else {
            continue;
        };
        let visibility = statement[..at].split_whitespace().last().unwrap_or("");
        if !visibility.starts_with("pub") {
            continue;
        }
        let path = statement[at + 4..].trim().trim_start_matches("self::");
        let child = identifier_at(path);
        if !children.contains_key(&child) {
            continue;
        }
        let rest = &path[child.len()..].trim_start_matches("::");
        let items = match rest.strip_prefix('{') {
            Some(group) => top_level_items(group),
            None => vec![rest.rsplit("::").next().unwrap_or("").to_string()],
        };
        for item in items {
            out.insert(item, child.clone());
        }
    }
    out
}

/// For one folder: child → the siblings it imports (directly, or through the folder's
/// re-exports of theirs).
fn sibling_imports(
    folder: &Path,
    children: &BTreeMap<String, PathBuf>,
) -> BTreeMap<String, BTreeSet<String>> {
    let through_face = reexports(&face_of(folder), children);
    let path_prefix = format!("crate::{}::", folder.to_string_lossy().replace('/', "::"));
    let mut graph = BTreeMap::new();
    for (name, file) in children {
        let code = code_of(&src().join(file));
        let mut named = referenced_modules(&code, "super::");
        named.extend(referenced_modules(&code, &path_prefix));
        let siblings: BTreeSet<String> = named
            .into_iter()
            .filter_map(|n| {
                if children.contains_key(&n) {
                    Some(n)
                } else {
                    through_face.get(&n).cloned()
                }
            })
            .filter(|n| n != name)
            .collect();
        graph.insert(name.clone(), siblings);
    }
    graph
}

#[test]
fn the_files_of_every_folder_import_one_way() {
    for (folder, children) in folders() {
        let graph = sibling_imports(&folder, &children);
        if let Some(cycle) = a_cycle(&graph) {
            panic!(
                "an import cycle inside src/{} runs {cycle}",
                folder.display()
            );
        }
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

/// The layers of docs/architecture.md's table: each row's `layer` cell and the module names in
/// backticks of its `modules` cell.
fn documented_layers() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let mut layers = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || cells[1].parse::<usize>().is_err() {
            continue;
        }
        assert_eq!(
            cells[1].parse::<usize>().unwrap(),
            layers.len(),
            "docs/architecture.md numbers its layers 0, 1, 2, … in order"
        );
        let modules: Vec<String> = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        layers.push(modules);
    }
    assert!(
        layers.len() >= 2,
        "docs/architecture.md has its layer table"
    );
    layers
}

#[test]
fn the_layers_of_the_architecture_document_run_one_way() {
    let layers = documented_layers();
    let layer_of = |m: &str| layers.iter().position(|l| l.iter().any(|x| x == m));
    let graph = import_graph();
    let documented: BTreeSet<&String> = layers.iter().flatten().collect();
    let in_src: BTreeSet<&String> = graph.keys().collect();
    assert_eq!(
        documented, in_src,
        "docs/architecture.md lists exactly the top-level modules of src/"
    );
    for (module, used) in graph {
        let mine = layer_of(&module).unwrap();
        for other in used {
            let theirs = layer_of(&other).unwrap();
            assert!(
                theirs <= mine,
                "{module} (layer {mine}) imports {other} (layer {theirs}); docs/architecture.md \
                 allows only its own layer and those above"
            );
        }
    }
}

#[test]
fn the_layout_document_names_every_source_file() {
    let layout = std::fs::read_to_string(root().join("docs/layout.md")).unwrap();
    let missing: Vec<String> = relative_sources()
        .into_iter()
        .map(|p| p.to_string_lossy().to_string())
        .filter(|p| !layout.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/layout.md does not name: {}",
        missing.join(", ")
    );
}

#[test]
fn the_compiler_makes_no_grouping_decision() {
    let graph = import_graph();
    assert!(
        !graph["compile"].contains("group"),
        "compile applies decisions made above it; it must not import group"
    );
}

#[test]
fn the_reference_parser_sees_groups_and_plain_paths() {
    let code = "use crate::{a, b::{c, d}, e::f};\nlet x = crate::g::h();\nuse notcrate::z;";
    let found: Vec<String> = referenced_modules(code, "crate::").into_iter().collect();
    assert_eq!(found, ["a", "b", "e", "g"]);
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    };
    assert!(a_cycle(&edges(&[("a", "b"), ("b", "c")])).is_none());
    assert!(a_cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "a")])).is_some());
}

#[test]
fn re_exports_are_resolved_to_their_child() {
    let dir = std::env::temp_dir().join(format!("topoplace-arch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let face = dir.join("mod.rs");
    std::fs::write(
        &face,
        "mod a;\nmod b;\npub use a::{Alpha, alpha};\npub(crate) use b::Beta;\nuse std::fmt;\n",
    )
    .unwrap();
    let children: BTreeMap<String, PathBuf> = [("a", "a.rs"), ("b", "b.rs")]
        .iter()
        .map(|(n, f)| (n.to_string(), PathBuf::from(f)))
        .collect();
    let found = reexports(&face, &children);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found["Alpha"], "a");
    assert_eq!(found["alpha"], "a");
    assert_eq!(found["Beta"], "b");
    assert_eq!(found.len(), 3);
}
