//! `TE-HANDSHAKE` and `TE-DESCRIPTOR`: what the runner's own transfer engine (strict, `mooncake_io::engine`)
//! found wrong with a decoder testee's handshake answer — a handshake it could not complete, a descriptor it
//! refused or that differs from what a real engine target writes, a write no advertised buffer covers — each
//! with what the real engine does (measured; `conformance/TESTEE.md`, "The transfer-engine segment
//! descriptor").

use mooncake_io::engine::{Issue, Step};

use super::PrefillerSide;
use mooncake_trace::finding::{CheckId, Finding};

/// The findings of the runner's own prefillers' engines, each issue once, in the order they were found.
pub(crate) async fn check_engines(sides: &[&PrefillerSide]) -> Vec<Finding> {
    let mut issues: Vec<Issue> = vec![];
    for side in sides {
        let Some(own) = side.own() else { continue };
        let Ok(status) = own.status().await else { continue };
        for i in status.te_issues {
            if !issues.contains(&i) {
                issues.push(i);
            }
        }
    }
    findings(issues)
}

/// One finding per issue.
pub(crate) fn findings(issues: Vec<Issue>) -> Vec<Finding> {
    issues.into_iter().map(finding).collect()
}

fn finding(i: Issue) -> Finding {
    let check = match i.step {
        Step::Handshake => CheckId::TeHandshake,
        Step::Descriptor => CheckId::TeDescriptor,
    };
    let what = if i.refused { "the runner refused the transfer" } else { "the runner wrote, as the real engine does" };
    Finding::new(check, format!("{}; {what}", i.detail)).about(format!("transfer-engine segment {}", i.session))
}
