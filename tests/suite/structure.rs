//! How the workspace's code is built (issue 33): every function is short enough to read in one screen — in the
//! wire crate's generator, the conformance crate and the offline model (`trace/`), each held at its own limit —
//! and the typed layer is written as `quote` token trees printed by `prettyplease` (no hand-formatted text). Each
//! test names the places that break its rule. The one function scanner of the workspace is here; the other crates'
//! sources are reached from the repository (skipped, counted, from the packaged crate, as `module_cycles` does).

use std::path::{Path, PathBuf};

/// The longest function each area may hold, in lines: the sources it covers (from the repository's root), and
/// its limit, which is exactly its longest function, so the limit follows the code down. Never raise one: split
/// the function. (The conformance crate and the offline model reached issue 33's goal, under 80.)
const AREAS: [(&str, &[&str], usize); 3] = [
    ("the generator", &["src/generate.rs", "src/generate"], 60),
    ("the conformance crate", &["conformance/src"], 77),
    ("the offline model", &["trace/src"], 78),
];

/// The `.rs` files of `rel` (a file or a directory), with their text.
fn sources(rel: &str) -> Vec<(PathBuf, String)> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let mut files = vec![];
    if p.is_dir() {
        crate::module_cycles::rust_files(&p, &mut files);
    } else {
        files.push(p);
    }
    files.sort();
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(&f).expect("source"))).collect()
}

fn generator_sources() -> Vec<(PathBuf, String)> {
    let files: Vec<_> = AREAS[0].1.iter().flat_map(|rel| sources(rel)).collect();
    assert!(files.len() > 5, "the generator's sources are found: {}", files.len());
    files
}

/// Every function of `text` with a body over several lines: (name, first line, length in lines). A function
/// starts at a line `<indent>[pub[(..)]] [async] [const] fn name` and ends at the first later line that is
/// `<indent>}`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let rest = ["pub(super) ", "pub(crate) ", "pub "].iter().find_map(|v| code.strip_prefix(v)).unwrap_or(code);
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        let rest = rest.strip_prefix("const ").unwrap_or(rest);
        let Some(sig) = rest.strip_prefix("fn ") else { continue };
        if line.trim_end().ends_with(';') || line.trim_end().ends_with('}') {
            continue;
        }
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
            out.push((name, i + 1, end + 2));
        }
    }
    out
}

#[test]
fn the_function_scanner_measures_what_it_should() {
    let text = "fn a() {\n    x();\n}\n\n    pub(super) fn b(\n        y: u8,\n    ) {\n        if y {\n        }\n    }\nfn c();\n\
                pub(crate) async fn d() {\n    y();\n}\n";
    let want = [("a", 1, 3), ("b", 5, 6), ("d", 12, 3)].map(|(n, l, len)| (n.to_string(), l, len));
    assert_eq!(functions(text), want);
}

#[test]
fn no_function_is_longer_than_its_areas_limit() {
    let mut problems = vec![];
    for (area, dirs, limit) in AREAS {
        if dirs
            .iter()
            .any(|d| !d.starts_with("src") && crate::in_repository(d, &format!("function lengths of {area}")).is_none())
        {
            continue;
        }
        let files: Vec<_> = dirs.iter().flat_map(|d| sources(d)).collect();
        assert!(files.len() > 5, "{area}: its sources are found ({})", files.len());
        let mut longest = 0;
        for (path, text) in files {
            for (name, line, len) in functions(&text) {
                longest = longest.max(len);
                if len > limit {
                    problems.push(format!(
                        "{}:{line}: `{name}` is {len} lines, over {area}'s {limit} (split it)",
                        path.display()
                    ));
                }
            }
        }
        if longest < limit {
            problems
                .push(format!("{area}: the longest function is now {longest} lines: lower its limit ({limit}) to it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The typed layer's Rust is token trees printed by `prettyplease`: no `writeln!` of code text (185 of them were
/// how the generator had kept its output's indentation by hand).
#[test]
fn the_typed_layer_generator_writes_no_text_by_hand() {
    let mut hits = vec![];
    for (path, text) in generator_sources().into_iter().filter(|(p, _)| p.to_string_lossy().contains("typed_rs")) {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("writeln!(") {
                hits.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "text written by hand in the typed-layer generator:\n{}", hits.join("\n"));
}
