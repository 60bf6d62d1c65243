//! The testee control protocol of `mooncake-conformance`, version 1 (`conformance/TESTEE.md`): the commands
//! the runner sends a testee, the `config` of each role, and the answers — one set of serde types for both
//! sides. The runner (`mooncake-conformance`) builds its commands and reads its answers with them; the
//! reference peer (`mooncake-peer testee`) parses the same commands with them. A testee in another language
//! speaks the JSON these types serialise to; nothing here is specific to the reference peer.
//!
//! Framing is one JSON object per line each way: the testee's [`Hello`] first, then one answer per command.
//! An answer is `{"ok": true, ...}` (the fields of the answer type, see [`ok_answer`]) or
//! `{"ok": false, "error": "..."}` ([`error_answer`]); [`read_answer`] turns a received line's value back
//! into a typed answer or the testee's error text.
//!
//! ```
//! use mooncake_testee_protocol::{Command, read_answer, DecoderStatus};
//!
//! let cmd = Command::Allocate { p_req_id: "p1".into(), transfer_id: "t1".into() };
//! assert_eq!(
//!     serde_json::to_value(&cmd).unwrap(),
//!     serde_json::json!({"cmd": "allocate", "p_req_id": "p1", "transfer_id": "t1"})
//! );
//! let answer = serde_json::json!({"ok": true, "finished": ["d1"], "pending_pulls": 0, "open_exchanges": 0});
//! let status: DecoderStatus = read_answer(&answer).unwrap();
//! assert_eq!(status.finished, ["d1"]);
//! assert_eq!(status.open_exchanges, Some(0));
//! ```
//!
//! Compatibility rules of the protocol: both sides ignore keys they do not know (no type here denies unknown
//! fields, except the role configs, where an unknown key is a mistake of the runner's); optional keys are
//! left out when they have their default value, so a testee that reads `config.get("bind", default)` gets its
//! default.

use std::collections::HashMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The `protocol` number of this version (`conformance/TESTEE.md`, "Versioning").
pub const PROTOCOL: u64 = 1;

/// The `hello` value that opens a testee's output.
pub const HELLO: &str = "mooncake-testee";

/// The first line a testee writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Always [`HELLO`].
    pub hello: String,
    /// The protocol version it speaks ([`PROTOCOL`]).
    pub protocol: u64,
    /// Its name and version, for reports.
    #[serde(default)]
    pub name: String,
    /// The spec revision names it speaks (`vllm-0.33.0`, `vllm-0.13.0..0.15.1`, ...).
    #[serde(default)]
    pub revisions: Vec<String>,
    /// The roles it can take (names a later protocol may add are kept, see [`Hello::takes`]).
    #[serde(default)]
    pub roles: Vec<String>,
}

impl Hello {
    /// A hello of this protocol version.
    pub fn new(name: impl Into<String>, revisions: Vec<String>, roles: &[Role]) -> Hello {
        let roles = roles.iter().map(|r| r.as_str().to_string()).collect();
        Hello { hello: HELLO.into(), protocol: PROTOCOL, name: name.into(), revisions, roles }
    }

    /// Whether it declared `role`.
    pub fn takes(&self, role: Role) -> bool {
        self.roles.iter().any(|r| r == role.as_str())
    }

    /// Reads a testee's first line; the error says why it is not a hello of this protocol version.
    pub fn parse(v: &Value) -> Result<Hello, HelloError> {
        if v.get("hello").and_then(Value::as_str) != Some(HELLO) {
            return Err(HelloError::NotHello { line: v.to_string() });
        }
        if v.get("protocol").and_then(Value::as_u64) != Some(PROTOCOL) {
            let got = v.get("protocol").map(|p| p.to_string()).unwrap_or_else(|| "(none given)".into());
            return Err(HelloError::Protocol { got });
        }
        let mut h: Hello =
            serde_json::from_value(v.clone()).map_err(|e| HelloError::Malformed { error: e.to_string() })?;
        if h.name.is_empty() {
            h.name = "?".into();
        }
        Ok(h)
    }
}

/// Why a testee's first line is not a hello the runner can use.
#[derive(Clone, Debug, PartialEq)]
pub enum HelloError {
    /// The line is not a hello at all (`"hello"` is missing or not this protocol's).
    NotHello {
        /// The line, as JSON.
        line: String,
    },
    /// A hello of another protocol version.
    Protocol {
        /// The version it gave, as JSON (`(none given)` when it gave none).
        got: String,
    },
    /// A hello of this version whose keys do not read (a missing name, an ill-typed list).
    Malformed {
        /// What serde said.
        error: String,
    },
}

impl std::fmt::Display for HelloError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HelloError::NotHello { line } => {
                write!(f, "the testee's first line is not a mooncake testee hello: {line}")
            }
            HelloError::Protocol { got } => {
                write!(f, "the testee speaks protocol {got}, the runner speaks {PROTOCOL} (conformance/TESTEE.md)")
            }
            HelloError::Malformed { error } => write!(f, "the testee's hello: {error}"),
        }
    }
}

impl std::error::Error for HelloError {}

/// A role a testee takes (one per process); also the role of a conformance case (`…/prefiller`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A prefill worker: a ROUTER that answers pulls and writes KV blocks.
    Prefiller,
    /// A decode worker: pulls over DEALERs, receives KV blocks.
    Decoder,
    /// The bootstrap HTTP server prefillers register with and decoders query.
    Bootstrap,
}

impl Role {
    /// The role's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Prefiller => "prefiller",
            Role::Decoder => "decoder",
            Role::Bootstrap => "bootstrap",
        }
    }

    /// The role of a wire name.
    pub fn parse(s: &str) -> Option<Role> {
        [Role::Prefiller, Role::Decoder, Role::Bootstrap].into_iter().find(|r| r.as_str() == s)
    }
}

/// A command of the runner (`{"cmd": "<name>", ...}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Take a role at a revision; `config` is the role's: [`BootstrapConfig`], [`PrefillerConfig`] or
    /// [`DecoderConfig`] (see [`Command::start`]). Answer: [`Started`].
    Start {
        /// The role.
        role: Role,
        /// A push revision the testee declared in its hello.
        revision: String,
        /// The role's configuration.
        #[serde(default)]
        config: Value,
    },
    /// Prefiller: the scheduler allocated the request.
    Allocate {
        /// The prefiller's request id.
        p_req_id: String,
        /// The transfer id decoders pull it by.
        transfer_id: String,
    },
    /// Prefiller: the request's prefill finished; these blocks (per KV group) may be pulled.
    Ready {
        /// The prefiller's request id.
        p_req_id: String,
        /// The transfer id.
        transfer_id: String,
        /// Block ids per KV group.
        blocks: Vec<Vec<u64>>,
    },
    /// Prefiller: the request ended without a transfer.
    Abort {
        /// The transfer id.
        transfer_id: String,
    },
    /// Prefiller: drop every cached peer layout.
    ForgetLayouts,
    /// Prefiller: the next `count` transfer-engine writes return `ret` without moving bytes. A decoder of the
    /// pull family: its next `count` transfer-engine reads do.
    FailNextTransfer {
        /// How many writes (reads) fail.
        #[serde(default = "one")]
        count: u64,
        /// The return code they give.
        #[serde(default = "minus_one")]
        ret: i64,
    },
    /// What happened so far. Answer: [`PrefillerStatus`], [`DecoderStatus`] or [`BootstrapStatus`].
    Status,
    /// Decoder: one scheduler step of pulls.
    Pull {
        /// The requests to pull.
        requests: Vec<Pull>,
    },
    /// Decoder: requests arrived at the scheduler (vLLM's `on_new_request`) and will be pulled later; with a
    /// `kv_lease_duration` the decoder renews their leases until their pulls settle. Only `d_req_id`,
    /// `transfer_id`, `engine_id` and `bootstrap_addr` are read.
    Announce {
        /// The requests.
        requests: Vec<Pull>,
    },
    /// Decoder: the bytes at `addr`. Answer: [`Memory`].
    ReadMemory {
        /// The address.
        addr: u64,
        /// How many bytes.
        len: u64,
    },
    /// Stop everything and exit (answered first).
    Stop,
}

fn one() -> u64 {
    1
}
fn minus_one() -> i64 {
    -1
}

impl Command {
    /// Every command name, in the order `conformance/TESTEE.md` documents them.
    pub const NAMES: [&'static str; 11] = [
        "start",
        "allocate",
        "ready",
        "abort",
        "forget_layouts",
        "fail_next_transfer",
        "status",
        "pull",
        "announce",
        "read_memory",
        "stop",
    ];

    /// A `start` command with the role's typed configuration.
    pub fn start(revision: impl Into<String>, config: &RoleConfig) -> Command {
        let (role, config) = match config {
            RoleConfig::Bootstrap(c) => (Role::Bootstrap, serde_json::to_value(c)),
            RoleConfig::Prefiller(c) => (Role::Prefiller, serde_json::to_value(c)),
            RoleConfig::Decoder(c) => (Role::Decoder, serde_json::to_value(c)),
        };
        Command::Start { role, revision: revision.into(), config: config.expect("configs serialise") }
    }

    /// The command's name (`"start"`, `"pull"`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Start { .. } => "start",
            Command::Allocate { .. } => "allocate",
            Command::Ready { .. } => "ready",
            Command::Abort { .. } => "abort",
            Command::ForgetLayouts => "forget_layouts",
            Command::FailNextTransfer { .. } => "fail_next_transfer",
            Command::Status => "status",
            Command::Pull { .. } => "pull",
            Command::Announce { .. } => "announce",
            Command::ReadMemory { .. } => "read_memory",
            Command::Stop => "stop",
        }
    }

    /// Reads a command line's value, as a testee does.
    pub fn parse(v: &Value) -> Result<Command, CommandError> {
        let name = v.get("cmd").and_then(Value::as_str).unwrap_or("");
        if !Command::NAMES.contains(&name) {
            return Err(CommandError::Unsupported(name.to_string()));
        }
        Command::deserialize(v).map_err(|e| CommandError::Invalid { cmd: name.to_string(), error: e.to_string() })
    }
}

/// Why a command line is not a command a testee can run.
#[derive(Clone, Debug, PartialEq)]
pub enum CommandError {
    /// A command this protocol version does not have (the testee answers `unsupported: <cmd>`).
    Unsupported(String),
    /// A known command with missing or ill-typed keys.
    Invalid {
        /// The command's name.
        cmd: String,
        /// What serde said.
        error: String,
    },
}

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandError::Unsupported(c) => write!(f, "unsupported: {c}"),
            CommandError::Invalid { cmd, error } => write!(f, "{cmd}: {error}"),
        }
    }
}

impl std::error::Error for CommandError {}

/// The configuration of a `start`, by role.
#[derive(Clone, Debug, PartialEq)]
pub enum RoleConfig {
    /// A bootstrap server.
    Bootstrap(BootstrapConfig),
    /// A prefiller.
    Prefiller(PrefillerConfig),
    /// A decoder.
    Decoder(DecoderConfig),
}

/// A key at its type's default is left out (`0`, `false`, empty).
fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}
/// A size at its default of 1 is left out.
fn is_one<T: From<u8> + PartialEq>(x: &T) -> bool {
    *x == T::from(1)
}
fn one_i64() -> i64 {
    1
}
fn one_usize() -> usize {
    1
}
fn localhost() -> String {
    "127.0.0.1".into()
}
fn is_localhost(s: &str) -> bool {
    s == "127.0.0.1"
}

/// `config` of a bootstrap server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootstrapConfig {
    /// `host:port` to listen on (default `127.0.0.1:0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// Deliberate faults (tests of the runner itself; the reference peer's `faults` list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
}

/// `config` of a prefiller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefillerConfig {
    /// The transfer backend: `tcp-engine` (Mooncake Transfer Engine's TCP transport; the default and only
    /// value for a process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<String>,
    /// The engine it registers as (generation 2 only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub engine_id: String,
    /// Its data-parallel rank.
    #[serde(default, skip_serializing_if = "is_default")]
    pub dp_rank: i64,
    /// Its tensor-parallel rank.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tp_rank: i64,
    /// Its engine's tensor-parallel size.
    #[serde(default = "one_i64", skip_serializing_if = "is_one")]
    pub tp_size: i64,
    /// Its pipeline-parallel rank.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pp_rank: i64,
    /// Its engine's pipeline-parallel size.
    #[serde(default = "one_i64", skip_serializing_if = "is_one")]
    pub pp_size: i64,
    /// The bootstrap server's URL to register with (none in generation 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
    /// The ROUTER's endpoint (default `tcp://127.0.0.1:*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// vLLM's abort timeout, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_timeout_s: Option<f64>,
    /// `kv_lease_duration` in seconds (revisions with KV leases, vLLM 0.34.0 on): a ready transfer is held that
    /// long and heartbeats extend it. Absent: leases off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_lease_duration_s: Option<f64>,
    /// The model facts it plans with.
    pub model: ModelConfig,
    /// Its registered KV regions.
    pub layout: LayoutConfig,
    /// Deliberate faults (tests of the runner itself; the reference peer's `faults` list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// Keep every ZeroMQ message; `status` lists them under `wire`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub record_wire: bool,
}

impl PrefillerConfig {
    /// A prefiller at rank 0 of a TP-1 engine with this model and layout, everything else at its default.
    pub fn new(model: ModelConfig, layout: LayoutConfig) -> PrefillerConfig {
        PrefillerConfig {
            transfer: None,
            engine_id: String::new(),
            dp_rank: 0,
            tp_rank: 0,
            tp_size: 1,
            pp_rank: 0,
            pp_size: 1,
            bootstrap: None,
            bind: None,
            abort_timeout_s: None,
            kv_lease_duration_s: None,
            model,
            layout,
            faults: vec![],
            record_wire: false,
        }
    }
}

/// `config` of a decoder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecoderConfig {
    /// The transfer backend (see [`PrefillerConfig::transfer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer: Option<String>,
    /// The transfer engine's handshake port, sent as `remote_port` (0: any free port).
    #[serde(default, skip_serializing_if = "is_default")]
    pub te_port: u16,
    /// The host it advertises (default `127.0.0.1`).
    #[serde(default = "localhost", skip_serializing_if = "is_localhost")]
    pub hostname: String,
    /// Its tensor-parallel rank.
    #[serde(default, skip_serializing_if = "is_default")]
    pub tp_rank: usize,
    /// Its engine's tensor-parallel size.
    #[serde(default = "one_usize", skip_serializing_if = "is_one")]
    pub tp_size: usize,
    /// Its pipeline-parallel rank.
    #[serde(default, skip_serializing_if = "is_default")]
    pub pp_rank: usize,
    /// Its engine's pipeline-parallel size.
    #[serde(default = "one_usize", skip_serializing_if = "is_one")]
    pub pp_size: usize,
    /// Its layout id (0: no layout caching).
    #[serde(default, skip_serializing_if = "is_default")]
    pub layout_id: u64,
    /// vLLM's abort timeout, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_timeout_s: Option<f64>,
    /// How long to wait for each reply, seconds (vLLM: abort timeout + 60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_timeout_s: Option<f64>,
    /// `kv_lease_duration` in seconds (revisions with KV leases): announced requests are renewed until their
    /// pulls settle. Absent: it never renews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_lease_duration_s: Option<f64>,
    /// Its registered KV regions.
    pub layout: LayoutConfig,
    /// Deliberate faults (tests of the runner itself).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// `status` lists every ZeroMQ message sent and received under `wire`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub record_wire: bool,
}

impl DecoderConfig {
    /// A decoder at rank 0 of a TP-1 engine with this layout, everything else at its default.
    pub fn new(layout: LayoutConfig) -> DecoderConfig {
        DecoderConfig {
            transfer: None,
            te_port: 0,
            hostname: localhost(),
            tp_rank: 0,
            tp_size: 1,
            pp_rank: 0,
            pp_size: 1,
            layout_id: 0,
            abort_timeout_s: None,
            recv_timeout_s: None,
            kv_lease_duration_s: None,
            layout,
            faults: vec![],
            record_wire: false,
        }
    }
}

/// A side's registered KV regions: the parallel layout columns of `MooncakeXferMetadata` plus the block count
/// of each region.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutConfig {
    /// Base address of each region.
    pub kv_caches_base_addr: Vec<u64>,
    /// Bytes per block of each region.
    pub block_lens: Vec<u64>,
    /// The KV payload's share of each block.
    pub kv_block_lens: Vec<u64>,
    /// The layer each region belongs to.
    pub registered_layer_names: Vec<String>,
    /// The layer index of each region.
    pub registered_layer_indices: Vec<i64>,
    /// The KV group of each region (where the revision carries it).
    #[serde(default)]
    pub registered_group_indices: Vec<i64>,
    /// Groups that share a region (where the revision carries it).
    #[serde(default)]
    pub registered_shared_group_ids: Vec<Vec<i64>>,
    /// Row offsets of packed regions (where the revision carries it).
    #[serde(default)]
    pub registered_row_offsets: Vec<i64>,
    /// Blocks per region.
    pub num_blocks: u64,
}

/// Model facts a prefiller plans with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// KV heads of the whole model.
    pub total_num_kv_heads: i64,
    /// Multi-head latent attention (one KV copy for every TP rank).
    #[serde(default, skip_serializing_if = "is_default")]
    pub use_mla: bool,
    /// `attn` or `mamba` per KV transfer group (default: one attention group, or one per group index seen).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_kinds: Vec<String>,
    /// Physical blocks per logical block.
    #[serde(default = "one_i64", skip_serializing_if = "is_one")]
    pub physical_blocks_per_logical: i64,
    /// Layer name → KV group, for layouts without group indices (default: from the layout's group indices).
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub layer_groups: HashMap<String, i64>,
    /// The attention pages are padded (refuses head re-sharding).
    #[serde(default, skip_serializing_if = "is_default")]
    pub padded_pages: bool,
    /// The attention KV cache is blocks-first (`[blocks, 2, ...]`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub blocks_first: bool,
    /// Tokens per block (the pull family's metadata carries it from vllm-ascend 0.23.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
}

impl ModelConfig {
    /// A model with this many KV heads and everything else at its default.
    pub fn new(total_num_kv_heads: i64) -> ModelConfig {
        ModelConfig {
            total_num_kv_heads,
            use_mla: false,
            group_kinds: vec![],
            physical_blocks_per_logical: 1,
            layer_groups: HashMap::new(),
            padded_pages: false,
            blocks_first: false,
            block_size: None,
        }
    }
}

/// One request of a decoder's `pull`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pull {
    /// The decoder's request id.
    pub d_req_id: String,
    /// The transfer id (generation 2; generation 1 has none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub transfer_id: String,
    /// The decoder's block ids per KV group.
    #[serde(default)]
    pub blocks: Vec<Vec<u64>>,
    /// The prefiller engine (generation 2).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub engine_id: String,
    /// The prefiller engine's bootstrap server (generation 2).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bootstrap_addr: String,
    /// Generation 1: the prefiller engine's host (`kv_transfer_params` `remote_host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_host: Option<String>,
    /// Generation 1: the prefiller engine's base port (`remote_port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_port: Option<u64>,
    /// The pull family: the prefiller's block ids per KV group (`kv_transfer_params` `remote_block_ids`), read
    /// pairwise with `blocks`. `transfer_id` is then the prefiller's request id (`remote_request_id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_blocks: Vec<Vec<u64>>,
}

/// The answer to `start`: the key of the role's address.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Started {
    /// A bootstrap server's URL (`http://127.0.0.1:PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A prefiller's ROUTER endpoint (`tcp://127.0.0.1:PORT`), the one it registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// A decoder's transfer-engine endpoint (`127.0.0.1:PORT`), sent as `remote_port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// One ZeroMQ message of a `wire` list (`record_wire`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireEntry {
    /// `in` (received) or `out` (sent).
    pub dir: String,
    /// The frames, hex-encoded (a prefiller's frame 0 is the routing id).
    pub frames: Vec<String>,
    /// The endpoint a decoder talked to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// A transfer a prefiller finished sending (or that expired).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinishedSending {
    /// The prefiller's request id.
    pub p_req_id: String,
    /// The transfer id.
    #[serde(default)]
    pub transfer_id: String,
    /// It was freed by the abort timeout, not by a pull.
    #[serde(default)]
    pub expired: bool,
}

/// One transfer-engine write a prefiller made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteRecord {
    /// The decoder's transfer-engine endpoint.
    #[serde(default)]
    pub session: String,
    /// Descriptors in the write.
    #[serde(default)]
    pub descriptors: u64,
    /// Bytes in the write.
    #[serde(default)]
    pub bytes: u64,
    /// The engine's return code.
    #[serde(default)]
    pub ret: i64,
}

/// The answer to a prefiller's `status`. Counts a testee left out are `None` (a case then reports them as
/// not idle); lists it left out are empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefillerStatus {
    /// Transfers in its table (0 after a case).
    #[serde(default)]
    pub tracked_transfers: Option<u64>,
    /// Exchanges not yet answered with a terminal reply (0 after a case).
    #[serde(default)]
    pub open_exchanges: Option<u64>,
    /// Peer layouts it holds (layout caching; the reference peer's own key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_layouts: Option<u64>,
    /// Transfers finished or expired, cumulative.
    #[serde(default)]
    pub finished_sending: Vec<FinishedSending>,
    /// Transfer-engine writes, cumulative.
    #[serde(default)]
    pub writes: Vec<WriteRecord>,
    /// Why it refused frames, one entry per refused frame (the reference peer's own key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Vec<String>>,
    /// Lease heartbeats it answered (revisions with KV leases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeats: Option<u64>,
    /// Every ZeroMQ message, with `record_wire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<Vec<WireEntry>>,
}

/// A request a decoder reported failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failed {
    /// The decoder's request id.
    pub d_req_id: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// The blocks reported invalid (where the revision reports failures that way).
    #[serde(default)]
    pub invalid_blocks: Vec<u64>,
    /// Reported in `failed_recving` instead (the revision's `failure_report` item).
    #[serde(default)]
    pub failed_recving: bool,
}

/// A request the decoder's revision never reports, with why. Read also from a bare request id (a testee
/// that gives no reason).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "UnsettledRepr")]
pub struct Unsettled {
    /// The decoder's request id.
    pub d_req_id: String,
    /// Why it never settled.
    #[serde(default)]
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum UnsettledRepr {
    Id(String),
    Entry {
        d_req_id: String,
        #[serde(default)]
        reason: String,
    },
}

impl From<UnsettledRepr> for Unsettled {
    fn from(r: UnsettledRepr) -> Unsettled {
        match r {
            UnsettledRepr::Id(d_req_id) => Unsettled { d_req_id, reason: String::new() },
            UnsettledRepr::Entry { d_req_id, reason } => Unsettled { d_req_id, reason },
        }
    }
}

impl PrefillerStatus {
    /// The `p_req_id`s of the transfers freed on expiry (`expired`) or after delivery (not `expired`).
    pub fn freed(&self, expired: bool) -> Vec<String> {
        self.finished_sending.iter().filter(|x| x.expired == expired).map(|x| x.p_req_id.clone()).collect()
    }
}

/// The answer to a decoder's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecoderStatus {
    /// Requests finished (with failed ones where the revision reports failures as finished).
    #[serde(default)]
    pub finished: Vec<String>,
    /// Requests failed.
    #[serde(default)]
    pub failed: Vec<Failed>,
    /// Requests the revision never reports; `None` when the testee does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsettled: Option<Vec<Unsettled>>,
    /// Pulls still waiting.
    #[serde(default)]
    pub pending_pulls: Option<u64>,
    /// Exchanges still open.
    #[serde(default)]
    pub open_exchanges: Option<u64>,
    /// Requests whose lease it still renews (0 once every announced request settled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased: Option<u64>,
    /// What became of its lease heartbeats (revisions with KV leases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeats: Option<HeartbeatCounts>,
    /// Every ZeroMQ message, with `record_wire`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<Vec<WireEntry>>,
    /// The pull family: its transfer-engine reads, cumulative, one per batch (`session` is the prefiller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<Vec<WriteRecord>>,
}

/// A decoder's lease heartbeats so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatCounts {
    /// Sent (one per prefiller worker).
    #[serde(default)]
    pub sent: u64,
    /// Answered with a status other than ERROR.
    #[serde(default)]
    pub renewed: u64,
    /// Answered ERROR.
    #[serde(default)]
    pub rejected: u64,
    /// The last ERROR's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rejection: Option<String>,
}

/// The answer to a bootstrap server's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BootstrapStatus {
    /// Registered workers.
    #[serde(default)]
    pub workers: u64,
    /// What `/query` answers now.
    #[serde(default)]
    pub table: Value,
}

/// The answer to `read_memory`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// The bytes, hex-encoded.
    pub hex: String,
}

/// An answer with no keys of its own (`{"ok": true}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Done {}

/// `{"ok": true, ...}` with the answer's keys.
pub fn ok_answer<T: Serialize>(body: &T) -> Value {
    let mut v = serde_json::to_value(body).unwrap_or(Value::Null);
    match &mut v {
        Value::Object(m) => {
            m.insert("ok".into(), Value::Bool(true));
            v
        }
        _ => serde_json::json!({"ok": true}),
    }
}

/// `{"ok": false, "error": ...}`.
pub fn error_answer(error: impl std::fmt::Display) -> Value {
    serde_json::json!({"ok": false, "error": error.to_string()})
}

/// A received answer: the typed answer if `ok` is true, otherwise the testee's error text.
pub fn read_answer<T: DeserializeOwned>(v: &Value) -> Result<T, AnswerError> {
    if v.get("ok") != Some(&Value::Bool(true)) {
        return Err(AnswerError::Refused(
            v.get("error").and_then(Value::as_str).unwrap_or("the testee refused without a reason").to_string(),
        ));
    }
    T::deserialize(v).map_err(|e| AnswerError::Unreadable { error: e.to_string(), answer: v.to_string() })
}

/// Why an answer line gives no typed answer.
#[derive(Clone, Debug, PartialEq)]
pub enum AnswerError {
    /// The testee answered `{"ok": false, ...}`: its error text (shown as it is).
    Refused(String),
    /// `{"ok": true, ...}` whose keys do not read as the command's answer.
    Unreadable {
        /// What serde said.
        error: String,
        /// The answer, as JSON.
        answer: String,
    },
}

impl std::fmt::Display for AnswerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnswerError::Refused(e) => f.write_str(e),
            AnswerError::Unreadable { error, answer } => {
                write!(f, "the testee's answer does not read as this protocol's answer: {error}: {answer}")
            }
        }
    }
}

impl std::error::Error for AnswerError {}
