//! One direction through the layers: in no crate of the workspace does a top-level module import, directly or
//! through others, from a module that imports it (h2's frame → codec → proto; here trace → conversation →
//! checks → report → writers), and no file imports from a file that imports it, but a module and its own
//! submodules (a `mod.rs` re-exporting a child, a child using its parent). Reads every `crate::…`, `super::…`
//! and `self::…` path in each crate's `src/` (test modules included: a test that needs a higher layer belongs
//! in `tests/`), builds the graph of top-level modules and the graph of files, and fails on any strongly
//! connected component of more than one node, naming the files behind each edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every member crate's source root (the fuzz harness too), but `testee-protocol`: one file, no modules to loop.
/// With, for each, how many of its modules at least import another (what shows the reader found the imports):
/// `io` is four modules of which one (backend) imports another (engine).
const CRATES: [(&str, usize); 6] = [
    ("src", 3),
    ("conformance/src", 3),
    ("trace/src", 3),
    ("reference-impl/src", 3),
    ("io/src", 1),
    ("fuzz/harness/src", 3),
];

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Every `.rs` file under `dir` (the structure test's scanner reads the same files).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text without `//` comments (doc comments name modules they do not import).
fn code(text: &str) -> String {
    text.lines().map(|l| l.find("//").map_or(l, |i| &l[..i])).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a piece of code names through `crate::x` or `crate::{x, y::z}`.
fn targets(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        // `crate::` inside a longer identifier (`mycrate::`) is not this crate.
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: those at brace depth 0, each before `::`, `,` or the end.
            let (mut depth, mut start) = (0usize, true);
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && depth == 0 && (c.is_alphanumeric() || c == '_') => {
                        out.insert(ident(&group[j..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name.to_string());
            }
        }
    }
    out
}

/// module -> module it imports -> files where it does.
fn graph(src: &Path) -> Graph {
    let mut files = vec![];
    rust_files(src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        let top = rel.split('/').next().expect("a component").trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" || top == "bin" {
            continue; // the crate root and binaries are above every module
        }
        let text = std::fs::read_to_string(&f).expect("read");
        for t in targets(&code(&text)) {
            if t != top && t != "self" && t != "super" {
                g.entry(top.clone()).or_default().entry(t).or_default().insert(rel.clone());
            }
        }
    }
    g
}

/// The strongly connected components of more than one module (Tarjan), each sorted.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = vec![];
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    let nodes: BTreeSet<&str> =
        g.iter().flat_map(|(a, m)| std::iter::once(a.as_str()).chain(m.keys().map(String::as_str))).collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = vec![];
    for (krate, least) in CRATES {
        if krate != "src" && crate::in_repository(krate, &format!("module cycles of {krate}")).is_none() {
            continue;
        }
        let g = graph(&root.join(krate));
        assert!(g.len() >= least, "{krate}: only {} modules import others: the reader found nothing", g.len());
        for comp in cycles(&g) {
            let mut why = vec![];
            for a in &comp {
                for (b, files) in &g[a] {
                    if comp.contains(b) {
                        why.push(format!("    {a} -> {b} ({})", files.iter().cloned().collect::<Vec<_>>().join(", ")));
                    }
                }
            }
            problems.push(format!("{krate}: {} import each other:\n{}", comp.join(", "), why.join("\n")));
        }
    }
    assert!(problems.is_empty(), "module cycles:\n{}", problems.join("\n"));
}

/// The segments of a path's tail as written after `crate::`, `super::` or `self::`, groups expanded:
/// `a::{b, c::{D, e::F}}` is `a::b`, `a::c::D` and `a::c::e::F`.
fn expand(s: &str) -> Vec<Vec<String>> {
    let mut segs: Vec<String> = vec![];
    let mut r = s;
    loop {
        let t = r.trim_start();
        if let Some(g) = t.strip_prefix('{') {
            let (mut depth, mut start, mut end, mut parts) = (0usize, 0, g.len(), vec![]);
            for (j, c) in g.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = j;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&g[start..j]);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&g[start..end]);
            let tails = parts.into_iter().filter(|p| !p.trim().is_empty()).flat_map(expand);
            return tails.map(|tail| segs.iter().cloned().chain(tail).collect()).collect();
        }
        let id = ident(t);
        if id.is_empty() {
            return vec![segs];
        }
        segs.push(id.to_string());
        match t[id.len()..].strip_prefix("::") {
            Some(x) => r = x,
            None => return vec![segs],
        }
    }
}

/// The module paths (from the crate root) that code in module `here` names through `crate::`, `super::` (any
/// number) or `self::`.
fn named_paths(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![];
    let mut rest = code;
    while let Some(i) = rest.find(['c', 's']) {
        let before = rest[..i].chars().next_back();
        let at = &rest[i..];
        rest = &rest[i + 1..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let (base, tail): (Vec<String>, &str) = if let Some(t) = at.strip_prefix("crate::") {
            (vec![], t)
        } else if let Some(t) = at.strip_prefix("self::") {
            (here.to_vec(), t)
        } else if at.starts_with("super::") {
            let (mut base, mut t) = (here.to_vec(), at);
            while let Some(x) = t.strip_prefix("super::") {
                base.pop();
                t = x;
            }
            (base, t)
        } else {
            continue;
        };
        out.extend(expand(tail).into_iter().map(|segs| base.iter().cloned().chain(segs).collect()));
    }
    out
}

/// file -> file it imports from (neither inside the other's module) -> the importing file.
fn file_graph(src: &Path) -> Graph {
    let mut files = vec![];
    rust_files(src, &mut files);
    let module_of = |f: &Path| -> Option<Vec<String>> {
        let rel = f.strip_prefix(src).expect("under src").to_string_lossy().replace('\\', "/");
        let mut segs: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
        if segs.first().is_some_and(|s| s == "bin") || segs == ["lib"] || segs == ["main"] {
            return None; // binaries and the crate root are above every module
        }
        if segs.last().is_some_and(|s| s == "mod") {
            segs.pop();
        }
        Some(segs)
    };
    let modules: BTreeMap<Vec<String>, String> = files
        .iter()
        .filter_map(|f| Some((module_of(f)?, f.strip_prefix(src).expect("under src").to_string_lossy().into_owned())))
        .collect();
    let mut g = Graph::new();
    for f in &files {
        let Some(here) = module_of(f) else { continue };
        let from = &modules[&here];
        let text = std::fs::read_to_string(f).expect("read");
        for path in named_paths(&code(&text), &here) {
            // The module the path ends in: its longest prefix that is a file of this crate.
            let Some(target) = (1..=path.len()).rev().map(|n| &path[..n]).find(|p| modules.contains_key(*p)) else {
                continue;
            };
            // A module and its own submodules (`mod.rs` re-exporting, a child using its parent) are one unit.
            if target.starts_with(&here) || here.starts_with(target) {
                continue;
            }
            g.entry(from.clone()).or_default().entry(modules[target].clone()).or_default().insert(from.clone());
        }
    }
    g
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = vec![];
    for (krate, _) in CRATES {
        if krate != "src" && crate::in_repository(krate, &format!("file cycles of {krate}")).is_none() {
            continue;
        }
        let g = file_graph(&root.join(krate));
        assert!(g.len() >= 3, "{krate}: only {} files import others: the reader found nothing", g.len());
        for comp in cycles(&g) {
            let edges: Vec<String> = comp
                .iter()
                .flat_map(|a| g[a].keys().filter(|b| comp.contains(b)).map(move |b| format!("    {a} -> {b}")))
                .collect();
            problems.push(format!("{krate}: {} import each other:\n{}", comp.join(", "), edges.join("\n")));
        }
    }
    assert!(problems.is_empty(), "file import cycles:\n{}", problems.join("\n"));
}

#[test]
fn the_reader_finds_the_paths_and_cycles_it_is_for() {
    let t = targets(
        code("use crate::a::X;\nuse crate::{b, c::{D, e::F}, g::H};\nlet x = crate::h::f(); // crate::z\nmycrate::q")
            .as_str(),
    );
    assert_eq!(t.into_iter().collect::<Vec<_>>(), ["a", "b", "c", "g", "h"]);
    let mut g = Graph::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        g.entry(a.into()).or_default().entry(b.into()).or_default().insert(format!("{a}.rs"));
    }
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".into(), "c".into()]]);
    g.get_mut("c").expect("c").remove("a");
    assert!(cycles(&g).is_empty());
    let here: Vec<String> = vec!["diff".into(), "fields".into()];
    let named = named_paths(&code("use super::{model::X, options};\nuse crate::plan::{self, error::E};"), &here);
    let want: Vec<Vec<&str>> =
        vec![vec!["diff", "model", "X"], vec!["diff", "options"], vec!["plan", "self"], vec!["plan", "error", "E"]];
    assert_eq!(named, want);
}
