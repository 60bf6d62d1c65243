//! Every citation of `spec/PROTOCOL.md` by section title in the code and the documents names a heading of it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !["target", ".git", ".venv", "fuzz", "node_modules"].contains(&name) {
                files(&p, out);
            }
        } else if name != "protocol_doc.rs" && p.extension().is_some_and(|x| x == "rs" || x == "md" || x == "toml") {
            out.push(p);
        }
    }
}

/// The section titles cited after a mention of PROTOCOL.md: `PROTOCOL.md`, "Title" or (§ "Title").
fn citations(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("PROTOCOL.md") {
        rest = &rest[i + "PROTOCOL.md".len()..];
        let tail: String = rest.chars().take(20).collect();
        let skip = tail.chars().take_while(|c| matches!(c, '`' | ')' | ',' | ' ' | '(' | '§' | '\\')).count();
        let after: String = rest.chars().skip(skip).collect();
        let after = after.trim_start_matches('\\');
        if let Some(q) = after.strip_prefix('"') {
            if let Some(end) = q.find(['"', '\\']) {
                out.push(q[..end].to_string());
            }
        }
    }
    out
}

#[test]
fn every_protocol_citation_names_a_heading() {
    let doc = std::fs::read_to_string(root().join("spec/PROTOCOL.md")).unwrap();
    let headings: Vec<String> =
        doc.lines().filter(|l| l.starts_with('#')).map(|l| l.trim_start_matches('#').trim().to_string()).collect();
    let mut all = vec![];
    files(&root(), &mut all);
    let mut checked = 0;
    for f in all {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        for c in citations(&text) {
            checked += 1;
            assert!(
                headings.contains(&c),
                "{}: cites spec/PROTOCOL.md \"{c}\", which is no heading (headings: {headings:?})",
                f.display()
            );
        }
    }
    assert!(checked >= 3, "only {checked} citations found: the scan is broken");
}

#[test]
fn the_scan_finds_citations() {
    assert_eq!(citations("see `spec/PROTOCOL.md`, \"Generation 1\"."), ["Generation 1"]);
    assert_eq!(citations("prose: spec/PROTOCOL.md (§ \"Behaviour items\")"), ["Behaviour items"]);
    assert!(citations("spec/PROTOCOL.md is the prose").is_empty());
}
