//! The spec-driven decoder, every revision and message: the first byte picks them, the rest is the frame.
//! Invariants: no panic; an accepted frame re-encodes, and the re-encoding decodes to the same value and
//! re-encodes to itself (canonical form is a fixed point).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mooncake_wire::codec::Codec;
use mooncake_wire::spec::Spec;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, frame)) = data.split_first() else { return };
    let revs = &Spec::builtin().push().revisions;
    let rev = &revs[sel as usize % revs.len()];
    let codec = Codec::builtin(&rev.revision).unwrap();
    let msgs: Vec<&str> = codec.messages().collect();
    let message = msgs[(sel as usize / revs.len()) % msgs.len()];
    if let Ok(v) = codec.decode(message, frame) {
        let canon = codec.encode(message, &v).expect("a decoded value encodes");
        let again = codec.decode(message, &canon).expect("the canonical encoding decodes");
        assert_eq!(again, v);
        assert_eq!(codec.encode(message, &again).unwrap(), canon);
    }
});
