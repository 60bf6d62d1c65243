//! The target bodies. Each `run(&[u8])` never returns an error: inputs the target cannot use are ignored,
//! and a broken invariant panics with a message that says which one.

pub mod bootstrap;
pub mod decoder;
pub mod keys;
pub mod prefiller;
pub mod spec_decode;
pub mod trace;
pub mod typed;

/// A target: its name (as in `fuzz/Cargo.toml` and `fuzz/seeds/<name>`) and its body.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// Whether inputs are arbitrary bytes read as structured operations (`arbitrary`) rather than a format.
    pub structured: bool,
    /// Its libFuzzer dictionary in `fuzz/dict/`.
    pub dict: &'static str,
}

pub const ALL: &[Target] = &[
    Target { name: "decode_spec", run: spec_decode::run, structured: false, dict: "msgpack.dict" },
    Target { name: "decode_typed", run: typed::run, structured: false, dict: "msgpack.dict" },
    Target { name: "trace", run: trace::run, structured: false, dict: "json.dict" },
    Target { name: "bootstrap", run: bootstrap::run, structured: false, dict: "json.dict" },
    Target { name: "store_keys", run: keys::run, structured: false, dict: "keys.dict" },
    Target { name: "prefiller", run: prefiller::run, structured: true, dict: "msgpack.dict" },
    Target { name: "decoder", run: decoder::run, structured: true, dict: "msgpack.dict" },
];

pub fn by_name(name: &str) -> Option<&'static Target> {
    ALL.iter().find(|t| t.name == name)
}
