//! The check ids of the code and of `conformance/CHECKS.md` are one list: every [`CheckId`] variant has a row
//! in one of the document's id tables, and every id a row names is a variant. A check added without its
//! documentation, or a documented check no code can emit, fails here.

use std::collections::BTreeSet;

use mooncake_trace::finding::CheckId;

/// Whether `s` has the shape of a check id: upper-case words of letters and digits joined by `-`.
fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()))
        && s.starts_with(|c: char| c.is_ascii_uppercase())
}

/// The ids in the first column of every table of `text` whose first header cell is `Id`; a cell may hold
/// several (`` `REPLY-DECODE` / `REQUEST-DECODE` ``, `` `BOOT-STATUS`, `BOOT-BODY` ``).
fn documented(text: &str) -> Vec<(String, usize)> {
    let mut out = vec![];
    let mut in_id_table = false;
    let mut header_next = true;
    for (n, line) in text.lines().enumerate() {
        let Some(row) = line.trim().strip_prefix('|') else {
            (in_id_table, header_next) = (false, true);
            continue;
        };
        let first = row.split('|').next().unwrap_or("").trim();
        if header_next {
            (in_id_table, header_next) = (first == "Id", false);
            continue;
        }
        if !in_id_table || first.starts_with("---") {
            continue;
        }
        let ids: Vec<&str> = first.split('`').skip(1).step_by(2).filter(|s| is_id(s)).collect();
        assert!(!ids.is_empty(), "CHECKS.md:{}: a row of an id table names no id: {first:?}", n + 1);
        out.extend(ids.into_iter().map(|s| (s.to_string(), n + 1)));
    }
    out
}

fn checks_md() -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("CHECKS.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_check_id_is_documented_and_every_documented_id_is_a_check() {
    let doc = documented(&checks_md());
    let documented: BTreeSet<&str> = doc.iter().map(|(s, _)| s.as_str()).collect();
    assert!(documented.len() > 40, "too few ids read from CHECKS.md: {documented:?}");
    let code: BTreeSet<&str> = CheckId::ALL.iter().map(|c| c.as_str()).collect();
    let undocumented: Vec<&&str> = code.difference(&documented).collect();
    let unknown: Vec<String> = doc
        .iter()
        .filter(|(s, _)| CheckId::parse(s).is_none())
        .map(|(s, line)| format!("{s} (CHECKS.md:{line})"))
        .collect();
    assert!(undocumented.is_empty(), "check ids without a row in conformance/CHECKS.md: {undocumented:?}");
    assert!(unknown.is_empty(), "ids in conformance/CHECKS.md that are no CheckId: {unknown:?}");
    // Each id has one row.
    let mut seen = BTreeSet::new();
    for (s, line) in &doc {
        assert!(seen.insert(s), "{s} is documented twice (again at CHECKS.md:{line})");
    }
}

#[test]
fn check_ids_are_distinct_and_serialize_as_their_id() {
    let strings: BTreeSet<&str> = CheckId::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(strings.len(), CheckId::ALL.len(), "two variants share an id");
    for c in CheckId::ALL {
        assert!(is_id(c.as_str()), "{c:?}: {:?} is not of the id shape", c.as_str());
        assert_eq!(c.to_string(), c.as_str());
        assert_eq!(serde_json::to_value(c).unwrap(), serde_json::Value::String(c.as_str().into()));
        assert_eq!(CheckId::parse(c.as_str()), Some(*c));
    }
    assert_eq!(CheckId::ZmqDecode.as_str(), "ZMQ-DECODE");
}

#[test]
fn the_table_reader_sees_two_ids_in_one_cell_and_skips_other_tables() {
    let text = "| Id | Where |\n|---|---|\n| `A-B` / `C-D` | V |\n| `E`, `F-G` | P |\n\n| Rule | x |\n|---|---|\n| `H-I` | y |\n";
    let ids: Vec<String> = documented(text).into_iter().map(|(s, _)| s).collect();
    assert_eq!(ids, ["A-B", "C-D", "E", "F-G"]);
}
