//! How the wire crate's generator is built (issue 33): the typed layer is written as `quote` token trees and
//! printed by `prettyplease` (no hand-formatted text), and every function of `src/generate/` is short enough to
//! read in one screen. Each test names the places that break its rule.

use std::path::{Path, PathBuf};

/// The longest function `src/generate/` may hold, in lines (the conformance crate's limit too). Never raise it.
const LONGEST_FUNCTION: usize = 80;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source directory") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn generator_sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![root.join("generate.rs")];
    sources(&root.join("generate"), &mut files);
    files.sort();
    assert!(files.len() > 5, "the generator's sources are found: {files:?}");
    files.into_iter().map(|f| (f.clone(), std::fs::read_to_string(&f).expect("source"))).collect()
}

/// Every function of `text` with a body over several lines: (name, first line, length in lines). A function
/// starts at a line `<indent>[pub[(..)]] [const] fn name` and ends at the first later line that is `<indent>}`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let rest = code.strip_prefix("pub(super) ").or_else(|| code.strip_prefix("pub(crate) ")).unwrap_or(code);
        let rest = rest.strip_prefix("pub ").unwrap_or(rest);
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
    let text = "fn a() {\n    x();\n}\n\n    pub(super) fn b(\n        y: u8,\n    ) {\n        if y {\n        }\n    }\nfn c();\n";
    assert_eq!(functions(text), vec![("a".to_string(), 1, 3), ("b".to_string(), 5, 6)]);
}

#[test]
fn no_generator_function_is_longer_than_the_limit() {
    let mut long = vec![];
    for (path, text) in generator_sources() {
        for (name, line, len) in functions(&text) {
            if len > LONGEST_FUNCTION {
                long.push(format!("{}:{line}: `{name}` is {len} lines", path.display()));
            }
        }
    }
    assert!(long.is_empty(), "functions over {LONGEST_FUNCTION} lines (split them):\n{}", long.join("\n"));
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
