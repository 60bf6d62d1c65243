//! Issue 16's per-revision benchmark input: the production-size pull (`MooncakeXferMetadata` of
//! [`crate::PRODUCTION`]: 64 requests, 4 KV-cache groups of 256 blocks, 122 regions) in the encoding of every
//! generation-2 push revision, for the generated typed decoder of that revision against msgspec with that
//! revision's class. The newest revision's message is carried into each revision by the spec-driven
//! conversion (`mooncake_wire::codec::convert`, dropping what the revision lacks); a revision with one flat
//! block list per request (before 0.20.0) carries the same 1,024 blocks per request as one list.

use mooncake_wire::codec::convert::{convert, Lacking};
use mooncake_wire::codec::Codec;
use mooncake_wire::generate::typed_rs::module_name;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{self, generated::push::REVISIONS, GeneratedRevision};

use crate::{metadata, Size, METADATA, PRODUCTION};

/// One revision's production pull.
pub struct RevisionPayload {
    /// The spec revision (`vllm-0.24.0`).
    pub revision: String,
    /// Its generated module's name (`vllm_0_24_0`), the benchmark's id.
    pub id: String,
    /// The pull in the revision's encoding.
    pub bytes: Vec<u8>,
    /// The block lists are one flat list per request.
    pub flat_blocks: bool,
    /// The generated code of the revision.
    pub generated: &'static GeneratedRevision,
}

/// The production pull in every generation-2 push revision, oldest first.
pub fn generation2() -> Vec<RevisionPayload> {
    let newest = Codec::builtin(typed::REVISION).expect("the newest revision");
    let value_of = |size: Size| newest.decode(METADATA, &metadata(size).encode()).expect("the newest decodes its own");
    let grouped = value_of(PRODUCTION);
    let flat =
        value_of(Size { groups: 1, blocks_per_group: PRODUCTION.groups * PRODUCTION.blocks_per_group, ..PRODUCTION });
    let mut out = vec![];
    for rev in Spec::builtin().push().revisions.iter().filter(|r| r.generation == 2) {
        let codec = Codec::builtin(&rev.revision).expect("built-in");
        let (v, flat_blocks) = match convert(&newest, &codec, METADATA, &grouped, Lacking::Drop) {
            Ok(v) => (v, false),
            Err(_) => (convert(&newest, &codec, METADATA, &flat, Lacking::Drop).expect("one group converts"), true),
        };
        let generated = REVISIONS.iter().find(|g| g.revision == rev.revision).expect("a generated revision");
        out.push(RevisionPayload {
            revision: rev.revision.clone(),
            id: module_name(&rev.revision),
            bytes: codec.encode(METADATA, &v).expect("encodes"),
            flat_blocks,
            generated,
        });
    }
    out
}

impl RevisionPayload {
    /// Decodes with the revision's generated decoder (owned strings, or borrowed) and drops the result.
    pub fn typed_decode(&self, bytes: &[u8], borrowed: bool) {
        (self.generated.decode_and_drop)(METADATA, bytes, borrowed)
            .expect("a generated message")
            .expect("the payload decodes");
    }
}
