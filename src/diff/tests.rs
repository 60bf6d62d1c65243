//! The classifier on the real history (`spec/push/`): each known break, and nothing else breaking.

use super::*;
use crate::spec::Spec;

fn pair(a: &str, b: &str) -> Report {
    let push = Spec::builtin().push();
    diff(push.revision(a).unwrap(), push.revision(b).unwrap())
}

fn row<'a>(r: &'a Report, subject: &str) -> &'a Change {
    r.changes.iter().find(|c| c.subject == subject).unwrap_or_else(|| panic!("no row {subject} in {}", render::markdown(r)))
}

#[test]
fn every_witness_agrees_with_its_verdict() {
    for r in consecutive(Spec::builtin().push()) {
        for c in &r.changes {
            assert_ne!(c.confirmed, Some(false), "{} → {}: {}\n{}", r.old, r.new, c.subject, render::markdown(&r));
        }
    }
}
