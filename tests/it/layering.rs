//! The modules' dependencies form no circle: each top-level module of `src/`, and
//! each file inside every folder of it, is read for the modules it names, and each
//! graph must be acyclic, so that every layer (and every file within one) can be
//! understood, and tested, without the ones above it.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// The modules `text` names as `crate::NAME` (also inside `use crate::{…}` lists) or,
/// for `prefix = "super"`, as `super::NAME`.
fn named(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    let needle = format!("{prefix}::");
    while let Some(i) = rest.find(&needle) {
        rest = &rest[i + needle.len()..];
        if let Some(list) = rest.strip_prefix('{') {
            // `use crate::{a, b::{c, d}, e::f}`: the names right after `{` or `,` at
            // the outer level.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        rest = &list[j..];
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_ascii_lowercase() || c == '_') => {
                        let name: String = list[j..]
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit()
                            })
                            .collect();
                        out.insert(name);
                        start = false;
                    }
                    c if !c.is_whitespace() => start = false,
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p, text));
        }
    }
    out
}

/// A circle in `graph`, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// The dependency graph of the modules directly in `dir`, by `prefix`.
fn graph_of(dir: &Path, prefix: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in sources(dir) {
        let rel = path.strip_prefix(dir).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if matches!(top.as_str(), "lib" | "main" | "mod") {
            continue;
        }
        let names = named(&text, prefix);
        graph
            .entry(top.clone())
            .or_default()
            .extend(names.into_iter().filter(|n| *n != top));
    }
    let known: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| known.contains(d));
    }
    graph
}

#[test]
fn modules_depend_on_each_other_without_circles() {
    let src = crate::support::checkout().join("src");
    let top = graph_of(&src, "crate");
    // Every file of src/ but the crate's roots and its settings sits in a folder of
    // its layer.
    let loose: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs") && !["lib.rs", "main.rs", "config.rs"].contains(&n.as_str()))
        .collect();
    assert!(loose.is_empty(), "loose files in src/: {loose:?}");
    assert!(
        top.contains_key("broker") && top["broker"].contains("store"),
        "{top:#?}"
    );
    assert_eq!(
        circle(&top),
        None,
        "a circle among src/'s modules: {top:#?}"
    );
    // The core never reaches up into the transports, UIs or commands.
    for low in [
        "runtime", "protocol", "spool", "store", "broker", "config", "guard",
    ] {
        for high in [
            "cmd", "server", "ui", "daemon", "api", "claude", "codex", "gemini", "tasks", "mailbox",
        ] {
            assert!(!top[low].contains(high), "{low} uses {high}");
        }
    }
}

/// The graph of the files directly in `src/<folder>/`: what each names as
/// `super::NAME` or `crate::<folder>::NAME`.
fn folder_graph(src: &Path, folder: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = src.join(folder);
    let mut graph = graph_of(&dir, "super");
    for (file, deps) in graph_of(&dir, &format!("crate::{folder}")) {
        graph.entry(file).or_default().extend(deps);
    }
    graph
}

#[test]
fn the_files_inside_each_folder_depend_on_each_other_without_circles() {
    let src = crate::support::checkout().join("src");
    let mut folders = 0;
    for e in std::fs::read_dir(&src).unwrap().map(Result::unwrap) {
        if !e.path().is_dir() {
            continue;
        }
        let folder = e.file_name().to_string_lossy().into_owned();
        let graph = folder_graph(&src, &folder);
        assert_eq!(
            circle(&graph),
            None,
            "a circle in src/{folder}/: {graph:#?}"
        );
        folders += 1;
    }
    assert!(folders >= 8, "only {folders} folders read");
}

#[test]
fn a_circle_between_two_files_of_a_folder_is_found() {
    let src = tempfile::tempdir().unwrap();
    let dir = src.path().join("claude");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("mod.rs"), "pub mod feed;\npub mod hook;\n").unwrap();
    std::fs::write(
        dir.join("feed.rs"),
        "use super::hook::{Decision, HookEvent};\n",
    )
    .unwrap();
    std::fs::write(dir.join("hook.rs"), "use super::{elicit, feed};\n").unwrap();
    let graph = folder_graph(src.path(), "claude");
    assert_eq!(
        circle(&graph),
        Some(vec![
            "feed".to_string(),
            "hook".to_string(),
            "feed".to_string()
        ])
    );
    // Named the long way round, too.
    std::fs::write(
        dir.join("hook.rs"),
        "fn f() { crate::claude::feed::note() }\n",
    )
    .unwrap();
    assert!(circle(&folder_graph(src.path(), "claude")).is_some());
}

#[test]
fn the_circle_finder_finds_circles() {
    let g: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
            .collect();
    assert!(circle(&g).is_some());
    assert_eq!(
        named("use crate::{a::{b, c}, d, e::f};\ncrate::g::h()", "crate"),
        ["a", "d", "e", "g"]
            .into_iter()
            .map(str::to_string)
            .collect()
    );
}
