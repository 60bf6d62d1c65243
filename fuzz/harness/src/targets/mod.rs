//! The target bodies. Each `run(&[u8])` never returns an error: inputs the target cannot use are ignored,
//! and a broken invariant panics with a message that says which one.

pub mod bootstrap;
pub mod cross;
pub mod decoder;
pub mod keys;
pub mod prefiller;
pub mod spec_decode;
pub mod tap_relay;
pub mod trace;
pub mod transfer_engine;
pub mod typed;
pub mod zmtp_server;

/// A target: its name (as in `fuzz/Cargo.toml` and `fuzz/seeds/<name>`) and its body.
pub struct Target {
    /// Its name: its cargo-fuzz binary and its seed directory `fuzz/seeds/<name>`.
    pub name: &'static str,
    /// Its body: takes the fuzzer's bytes, panics when an invariant breaks.
    pub run: fn(&[u8]),
    /// Whether inputs are arbitrary bytes read as structured operations (`arbitrary`) rather than a format.
    pub structured: bool,
    /// Its libFuzzer dictionary in `fuzz/dict/`.
    pub dict: &'static str,
    /// libFuzzer's `-max_len` for it: a run's cost grows with the input's length, and every path of a MessagePack
    /// decoder is reachable in a few KiB (inputs of megabytes are the hardening tests' job, `tests/hardening.rs`);
    /// a trace needs room for a whole recorded conversation.
    pub max_len: usize,
}

/// Every target, in the order of `fuzz/Cargo.toml`'s `[[bin]]`s.
pub const ALL: &[Target] = &[
    Target { name: "decode_spec", run: spec_decode::run, structured: false, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "decode_typed", run: typed::run, structured: false, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "trace", run: trace::run, structured: false, dict: "json.dict", max_len: 16384 },
    Target { name: "bootstrap", run: bootstrap::run, structured: false, dict: "json.dict", max_len: 4096 },
    Target { name: "store_keys", run: keys::run, structured: false, dict: "keys.dict", max_len: 4096 },
    Target { name: "prefiller", run: prefiller::run, structured: true, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "decoder", run: decoder::run, structured: true, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "transfer_engine", run: transfer_engine::run, structured: false, dict: "json.dict", max_len: 4096 },
    Target { name: "cross", run: cross::run, structured: true, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "zmtp_server", run: zmtp_server::run, structured: false, dict: "msgpack.dict", max_len: 4096 },
    Target { name: "tap_relay", run: tap_relay::run, structured: true, dict: "msgpack.dict", max_len: 4096 },
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    ALL.iter().find(|t| t.name == name)
}
