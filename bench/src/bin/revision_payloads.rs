//! Writes the inputs of the per-revision typed-decode benchmark (`mooncake_wire_bench::revisions`) for the
//! msgspec side (`msgspec_revisions.py`): `<dir>/<id>.msgpack` (the production pull in that revision's
//! encoding), `<dir>/<id>.revision.json` (the spec revision, from which msgspec's classes are built as the
//! differential-test oracle builds them) and `manifest.json`. Checks first that the generated decoder and the
//! spec codec of each revision read the payload and re-encode it to the same bytes.

use std::path::PathBuf;

use mooncake_wire::codec::Codec;
use mooncake_wire::spec::Spec;
use mooncake_wire::typed::Strictness;
use mooncake_wire_bench::revisions::generation2;
use mooncake_wire_bench::METADATA;
use serde_json::json;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: revision_payloads <dir>"));
    std::fs::create_dir_all(&dir).expect("create the payload directory");
    let mut manifest = vec![];
    for p in generation2() {
        let again = (p.generated.round_trip)(METADATA, &p.bytes, Strictness::Msgspec).unwrap().unwrap();
        assert_eq!(again, p.bytes, "{}: the generated decoder and encoder do not round-trip", p.revision);
        let codec = Codec::builtin(&p.revision).unwrap();
        assert_eq!(codec.encode(METADATA, &codec.decode(METADATA, &p.bytes).unwrap()).unwrap(), p.bytes);
        let rev = Spec::builtin().revision(&p.revision).unwrap().clone();
        std::fs::write(dir.join(format!("{}.msgpack", p.id)), &p.bytes).expect("write a payload");
        std::fs::write(dir.join(format!("{}.revision.json", p.id)), serde_json::to_string(&*rev).unwrap())
            .expect("write a revision");
        manifest.push(json!({
            "id": p.id, "revision": p.revision, "message": METADATA, "bytes": p.bytes.len(),
            "flat_blocks": p.flat_blocks, "file": format!("{}.msgpack", p.id), "spec": format!("{}.revision.json", p.id),
        }));
    }
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap())
        .expect("write manifest");
    println!("{} revision payloads in {}", manifest.len(), dir.display());
}
