//! The protocol prose can be followed from everywhere it is cited: every citation of `spec/PROTOCOL.md` in the
//! code and the documents — by anchor (`spec/PROTOCOL.md#side-channel`) or by section title
//! (`spec/PROTOCOL.md`, "Generation 1") — names an anchor or a heading of it, and so does every citation of
//! `spec/README.md` by title and of `spec/MSGSPEC.md` by section number (`spec/MSGSPEC.md` §4); every relative
//! link of every Markdown document reaches a file (and, into `PROTOCOL.md`, one of its anchors); and nothing
//! cites a document outside the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of the repository that can cite the prose: sources, documents, spec files, scripts.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if !["target", ".git", ".venv", "node_modules", "corpus", "artifacts", "__pycache__"].contains(&name) {
                files(&p, out);
            }
        } else if name != "protocol_doc.rs"
            && p.extension().is_some_and(|x| ["rs", "md", "toml", "py", "sh"].iter().any(|e| x == *e))
        {
            out.push(p);
        }
    }
}

/// The section titles cited after a mention of PROTOCOL.md: `PROTOCOL.md`, "Title" or (§ "Title").
fn title_citations(text: &str) -> Vec<String> {
    titles_cited(text, "PROTOCOL.md")
}

/// The section titles cited after each mention of `doc`: `doc`, "Title" or (§ "Title").
fn titles_cited(text: &str, doc: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find(doc) {
        rest = &rest[i + doc.len()..];
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

/// The anchors cited as `PROTOCOL.md#anchor`.
fn anchor_citations(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("PROTOCOL.md#") {
        rest = &rest[i + "PROTOCOL.md#".len()..];
        let a: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
        // `PROTOCOL.md#{anchor}` in a format string is no citation.
        if !a.is_empty() {
            out.push(a);
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A Markdown document's headings (outside code fences) and anchors (explicit `<a id>` and heading slugs).
fn headings_and_anchors(doc: &str) -> (Vec<String>, BTreeSet<String>) {
    let mut headings = vec![];
    let mut anchors = BTreeSet::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            let h = line.trim_start_matches('#').trim().to_string();
            anchors.insert(slug(&h));
            headings.push(h);
        }
        let mut rest = line;
        while let Some(i) = rest.find("<a id=\"") {
            rest = &rest[i + 7..];
            if let Some(end) = rest.find('"') {
                anchors.insert(rest[..end].to_string());
            }
        }
    }
    (headings, anchors)
}

/// The targets of a Markdown document's inline links `[text](target)` outside code fences and code spans.
fn links(doc: &str) -> Vec<String> {
    let mut out = vec![];
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop code spans: a link inside backticks is text.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            out.push(rest[..end].trim_matches(['<', '>']).to_string());
            rest = &rest[end..];
        }
    }
    out
}

/// Every citing file's path (from the root) and text.
fn texts() -> Vec<(String, String)> {
    let mut all = vec![];
    files(&root(), &mut all);
    all.into_iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).ok()?;
            Some((f.strip_prefix(root()).unwrap().display().to_string(), text))
        })
        .collect()
}

/// `path:line: text` of every line of a citing file that holds one of `needles`.
fn lines_holding(needles: &[&str]) -> Vec<String> {
    let mut out = vec![];
    for (rel, text) in texts() {
        for (n, line) in text.lines().enumerate() {
            if needles.iter().any(|x| line.contains(x)) {
                out.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    out
}

fn protocol() -> (Vec<String>, BTreeSet<String>) {
    headings_and_anchors(&std::fs::read_to_string(root().join("spec/PROTOCOL.md")).unwrap())
}

#[test]
fn every_protocol_citation_names_a_section() {
    let (headings, anchors) = protocol();
    let (mut by_title, mut by_anchor) = (0, 0);
    let mut bad = vec![];
    for (rel, text) in texts() {
        for c in title_citations(&text) {
            by_title += 1;
            if !headings.contains(&c) {
                bad.push(format!("{rel}: cites spec/PROTOCOL.md \"{c}\", which is no heading"));
            }
        }
        for a in anchor_citations(&text) {
            by_anchor += 1;
            if !anchors.contains(&a) {
                bad.push(format!("{rel}: cites spec/PROTOCOL.md#{a}, which is no anchor"));
            }
        }
    }
    assert!(bad.is_empty(), "{}\n(anchors: {anchors:?})", bad.join("\n"));
    assert!(by_title >= 3 && by_anchor >= 15, "only {by_title} + {by_anchor} citations found: the scan is broken");
    println!("{by_title} title citations and {by_anchor} anchor citations of spec/PROTOCOL.md resolve");
}

/// The section numbers cited as `spec/MSGSPEC.md` §N (also §N–§M, §N, §M: every number in the run).
fn msgspec_sections_cited(text: &str) -> Vec<u32> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("MSGSPEC.md") {
        rest = &rest[i + "MSGSPEC.md".len()..];
        let run: String = rest.chars().take(40).take_while(|c| !matches!(c, ')' | '.' | ';' | '(' | ':')).collect();
        let run = run.replace("//!", " ");
        for part in run.split('§').skip(1) {
            let n: String = part.chars().take_while(char::is_ascii_digit).collect();
            out.extend(n.parse::<u32>());
        }
    }
    out
}

/// The titles cited after `spec/README.md`, as they read: a Rust string literal continued over lines (`\n\`
/// at the end of one) as the text it makes, a title broken over comment lines as one line; a quote that starts
/// no title is none.
fn readme_titles_cited(text: &str) -> Vec<String> {
    titles_cited(&text.replace("\\n\\\n", "\n"), "spec/README.md")
        .into_iter()
        .map(|c| c.split_whitespace().filter(|w| !["//!", "///", "//", "#"].contains(w)).collect::<Vec<_>>().join(" "))
        .filter(|c| c.starts_with(|ch: char| ch.is_alphanumeric()))
        .collect()
}

#[test]
fn every_spec_readme_and_msgspec_citation_names_a_section() {
    let (readme, _) = headings_and_anchors(&std::fs::read_to_string(root().join("spec/README.md")).unwrap());
    let (msgspec, _) = headings_and_anchors(&std::fs::read_to_string(root().join("spec/MSGSPEC.md")).unwrap());
    let numbered: BTreeSet<u32> =
        msgspec.iter().filter_map(|h| h.split('.').next().and_then(|n| n.parse().ok())).collect();
    let (mut titles, mut sections) = (0, 0);
    let mut bad = vec![];
    for (rel, text) in texts() {
        for c in readme_titles_cited(&text) {
            titles += 1;
            // Headings carry their file pattern after the title: "Store keys (`store-keys/*.toml`, …)".
            let named = |h: &String| h == &c || h.strip_prefix(c.as_str()).is_some_and(|r| r.starts_with(" ("));
            if !readme.iter().any(named) {
                bad.push(format!("{rel}: cites spec/README.md \"{c}\", which is no heading"));
            }
        }
        for n in msgspec_sections_cited(&text) {
            sections += 1;
            if !numbered.contains(&n) {
                bad.push(format!("{rel}: cites spec/MSGSPEC.md §{n}, which is no section"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(titles >= 8 && sections >= 8, "only {titles} + {sections} citations found: the scan is broken");
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    // Spelled in parts, so that a search of the repository for those paths finds no citation here either.
    let bad = lines_holding(&[concat!("shared", "/reference"), concat!("/work", "/shared")]);
    assert!(
        bad.is_empty(),
        "cite the repository's own documents (spec/PROTOCOL.md, spec/README.md, spec/MSGSPEC.md):\n{}",
        bad.join("\n")
    );
}

#[test]
fn nothing_cites_the_old_outside_document() {
    let bad = lines_holding(&["push-protocol"]);
    assert!(bad.is_empty(), "cite spec/PROTOCOL.md instead of the push-protocol notes:\n{}", bad.join("\n"));
}

#[test]
fn every_relative_doc_link_reaches_a_file() {
    let (_, protocol_anchors) = protocol();
    let mut all = vec![];
    files(&root(), &mut all);
    let mut checked = 0;
    let mut bad = vec![];
    // From the packaged crate (scripts/package-check.sh), links to the rest of the repository cannot resolve.
    let packaged = root().join("Cargo.toml.orig").exists();
    let mut outside = 0;
    for f in all.iter().filter(|f| f.extension().is_some_and(|x| x == "md")) {
        let text = std::fs::read_to_string(f).unwrap();
        let (_, own_anchors) = headings_and_anchors(&text);
        let rel = f.strip_prefix(root()).unwrap().display().to_string();
        for link in links(&text) {
            if link.is_empty() || link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, frag) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() { f.clone() } else { f.parent().unwrap().join(path) };
            if !target.exists() {
                if packaged {
                    // Another crate's or the repository's file: not in this crate's package.
                    outside += 1;
                } else {
                    bad.push(format!("{rel}: link to {link}: no such file"));
                }
                continue;
            }
            let Some(frag) = frag else { continue };
            let anchors = if path.is_empty() {
                Some(&own_anchors)
            } else if target.canonicalize().ok() == root().join("spec/PROTOCOL.md").canonicalize().ok() {
                Some(&protocol_anchors)
            } else {
                None
            };
            if let Some(anchors) = anchors {
                if !anchors.contains(frag) {
                    bad.push(format!("{rel}: link to {link}: no such anchor"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
    assert!(checked >= 20, "only {checked} relative links found: the scan is broken");
    if outside > 0 {
        println!("SKIPPED: {outside} relative links to the rest of the repository — not in the packaged crate");
    }
    println!("{checked} relative links resolve");
}

#[test]
fn the_scans_find_what_they_look_for() {
    assert_eq!(title_citations("see `spec/PROTOCOL.md`, \"Generation 1\"."), ["Generation 1"]);
    assert_eq!(title_citations("prose: spec/PROTOCOL.md (§ \"Behaviour items\")"), ["Behaviour items"]);
    assert!(title_citations("spec/PROTOCOL.md is the prose").is_empty());
    assert_eq!(anchor_citations("(`spec/PROTOCOL.md#byte-plan`, spec/PROTOCOL.md#gen1)"), ["byte-plan", "gen1"]);
    assert_eq!(titles_cited("spec/README.md, \"Store keys\" and", "spec/README.md"), ["Store keys"]);
    assert_eq!(readme_titles_cited("(spec/README.md, \"Wire\\n\\\n//! fingerprint\")"), ["Wire fingerprint"]);
    assert!(readme_titles_cited("`spec/README.md`\"),").is_empty());
    assert_eq!(msgspec_sections_cited("(`spec/MSGSPEC.md` §2, §4, §5)."), [2, 4, 5]);
    assert_eq!(msgspec_sections_cited("`spec/MSGSPEC.md`\n//! §2–§3)."), [2, 3]);
    assert_eq!(slug("Side channel: sockets and frames"), "side-channel-sockets-and-frames");
    assert_eq!(slug("The pull: `MooncakeXferMetadata`"), "the-pull-mooncakexfermetadata");
    assert_eq!(links("a [x](../b.md#c) and `[no](link)` [y](d.md)\n```\n[z](e)\n```"), ["../b.md#c", "d.md"]);
    let (h, a) = headings_and_anchors("<a id=\"one\"></a>\n## Two words\n```\n# not\n```");
    assert_eq!(h, ["Two words"]);
    assert_eq!(a.into_iter().collect::<Vec<_>>(), ["one", "two-words"]);
}
