//! What the spec-driven decoder target can decode: every message of every built-in revision, plus the synthetic
//! revision that exercises every msgspec struct option (`conformance/tests/data/struct-options.toml`; vLLM's
//! own structs only use `omit_defaults`). One selector byte picks a (revision, message) pair.

use std::sync::{Arc, OnceLock};

use mooncake_wire::codec::Codec;
use mooncake_wire::spec::{Revision, Spec};

/// The synthetic struct-options revision, as the differential test against msgspec uses it.
pub const STRUCT_OPTIONS_TOML: &str = include_str!("../../../conformance/tests/data/struct-options.toml");

/// One decodable revision and its messages, in spec order.
pub struct Entry {
    /// The revision.
    pub revision: Arc<Revision>,
    /// Its spec-driven codec.
    pub codec: Arc<Codec>,
    /// The names of its messages.
    pub messages: Vec<String>,
}

/// Every built-in revision (oldest first), then the synthetic one.
pub fn entries() -> &'static [Entry] {
    static ALL: OnceLock<Vec<Entry>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut revs: Vec<Arc<Revision>> = Spec::builtin().push().revisions.clone();
        let synthetic = Spec::from_files([("struct-options.toml".to_string(), STRUCT_OPTIONS_TOML.to_string())])
            .expect("synthetic spec loads");
        revs.push(synthetic.revision("struct-options").expect("struct-options revision").clone());
        revs.into_iter()
            .map(|rev| {
                let codec = Arc::new(Codec::new(rev.clone()).expect("revisions compile"));
                let messages = codec.messages().map(String::from).collect();
                Entry { revision: rev, codec, messages }
            })
            .collect()
    })
}

/// The (revision, message) a selector byte picks: `sel % revisions` is the revision, the rest the message.
pub fn select(sel: u8) -> (&'static Entry, &'static str) {
    let all = entries();
    let e = &all[sel as usize % all.len()];
    let m = &e.messages[(sel as usize / all.len()) % e.messages.len()];
    (e, m)
}

/// The selector byte of a (revision, message) pair, if one byte can name it.
pub fn selector(revision: &str, message: &str) -> Option<u8> {
    let all = entries();
    let r = all.iter().position(|e| e.revision.revision == revision)?;
    let m = all[r].messages.iter().position(|x| x == message)?;
    u8::try_from(r + all.len() * m).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_has_a_selector_that_selects_it() {
        let mut n = 0;
        for e in entries() {
            for m in &e.messages {
                let s = selector(&e.revision.revision, m)
                    .unwrap_or_else(|| panic!("{} {m} has no selector byte", e.revision.revision));
                let (e2, m2) = select(s);
                assert_eq!((e2.revision.revision.as_str(), m2), (e.revision.revision.as_str(), m.as_str()));
                n += 1;
            }
        }
        assert!(n >= 12, "{n} messages");
    }
}
