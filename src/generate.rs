//! Every generated artefact, as (path relative to the repository root, contents): under `schema/` the JSON
//! Schemas and wire tables per revision and the wire diff of every pair of consecutive revisions; under
//! `src/typed/generated/` the typed layer ([`typed_rs`]).
//! `tests/generated.rs` fails when the committed files differ; `BLESS=1 cargo test --test generated` rewrites
//! them.

use std::collections::BTreeMap;

use crate::codec::{Codec, Scope};
use crate::spec::Spec;
use crate::{render, schema};

pub mod typed_rs;

/// Every generated artefact of `spec`: repository-relative path → contents (what `tests/generated.rs` compares and rewrites).
pub fn artefacts(spec: &Spec) -> BTreeMap<String, String> {
    let mut out = match typed_rs::sources(spec) {
        Ok(m) => m,
        Err(e) => panic!("the typed layer does not generate: {e}"),
    };
    for fam in &spec.families {
        out.insert(format!("schema/{}/README.md", fam.name), render::family_index(fam));
        for w in fam.revisions.windows(2) {
            let r = crate::diff::diff(&w[0], &w[1]);
            out.insert(
                format!("schema/{}/diff/{}__{}.md", fam.name, r.old, r.new),
                format!(
                    "<!-- Generated from spec/ by mooncake-wire (`mooncake-conformance diff {} {}`). Do not edit: regenerate with `BLESS=1 cargo test --test generated`. -->\n\n{}",
                    r.old,
                    r.new,
                    crate::diff::render::markdown(&r)
                ),
            );
        }
        for rev in &fam.revisions {
            out.insert(format!("schema/{}/{}.md", fam.name, rev.revision), render::revision_table(rev));
            for scope in [Scope::Wire, Scope::Bootstrap] {
                let codec = match Codec::with_scope(rev.clone(), scope) {
                    Ok(c) => c,
                    Err(e) => panic!("{} does not compile: {e}", rev.revision),
                };
                for m in codec.messages().collect::<Vec<_>>() {
                    let s = schema::message_schema(&codec, m).expect("message");
                    let dir = if scope == Scope::Bootstrap { "bootstrap/" } else { "" };
                    out.insert(
                        format!("schema/{}/{}/{dir}{m}.schema.json", fam.name, rev.revision),
                        serde_json::to_string_pretty(&s).expect("JSON") + "\n",
                    );
                }
            }
        }
    }
    out
}
