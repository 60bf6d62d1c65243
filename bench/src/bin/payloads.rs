//! Writes the benchmark inputs for the msgspec comparison: `<dir>/<id>.msgpack` for every payload, the 0.33.0
//! revision as JSON (`revision.json`, from which the Python side builds its msgspec classes exactly as
//! `tests/oracle/msgspec_oracle.py` does) and `manifest.json` (id, message, size, byte length).

use std::path::PathBuf;

use mooncake_wire::spec::Spec;
use mooncake_wire::typed;
use mooncake_wire_bench::all;
use serde_json::json;

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("usage: payloads <dir>"));
    std::fs::create_dir_all(&dir).expect("create the payload directory");
    let mut manifest = vec![];
    for p in all() {
        let file = format!("{}.msgpack", p.id());
        std::fs::write(dir.join(&file), &p.bytes).expect("write a payload");
        manifest.push(
            json!({"id": p.id(), "message": p.message, "size": p.size.name, "file": file, "bytes": p.bytes.len()}),
        );
    }
    let rev = Spec::builtin().revision(typed::REVISION).expect("built-in revision").clone();
    std::fs::write(dir.join("revision.json"), serde_json::to_string(&*rev).expect("revision serializes"))
        .expect("write revision.json");
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap())
        .expect("write manifest.json");
    println!("{} payloads in {}", manifest.len(), dir.display());
}
