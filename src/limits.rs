//! Every resource limit of the codec (and of the transfer planner), in one place.
//!
//! msgspec itself has no limits besides Python's recursion limit, so each number here is a deliberate
//! divergence from it, chosen far above anything vLLM sends. The codec never allocates from a length an
//! input declares without first checking that the rest of the input can hold it: a declared length of
//! 2^32-1 followed by end of input costs nothing and fails as truncated, as msgspec does.

/// Largest frame (one ZeroMQ message, one MessagePack document) the decoder accepts, in bytes.
/// A production `MooncakeXferMetadata` (1,024 requests × 4 groups × 256 blocks) is about 3 MiB.
/// The reference peer also sets ZMQ_MAXMSGSIZE to this value.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Largest message (the sum of its frames) a ZeroMQ server here buffers, in bytes: frames with the MORE flag
/// are held until the last one, so each frame's own limit does not bound them. A Mooncake message is one
/// frame (plus a routing id), so this is [`MAX_FRAME_BYTES`].
pub const MAX_MESSAGE_BYTES: usize = MAX_FRAME_BYTES;

/// How long a new connection to a server here (the prefiller's ROUTER, the decoder's transfer-engine target, the
/// bootstrap server, the tap's relay) has to finish its handshake (ZMTP greeting and READY; TE handshake frame) or
/// send a request's headers, in seconds. A real peer takes milliseconds; libzmq's own default is 30 s.
pub const HANDSHAKE_TIMEOUT_SECS: u64 = 10;

/// How long a message once begun may stay incomplete on a server here (a ZMTP frame or MORE frames; an HTTP
/// request body), in seconds. A connection idle between messages is not timed out.
pub const STALLED_MESSAGE_TIMEOUT_SECS: u64 = 10;

/// Connections one server here keeps open at once, in all; beyond, a new one is closed at once (logged).
pub const MAX_SERVER_CONNECTIONS: usize = 4096;

/// Connections one server here keeps open at once from one IP address; beyond, a new one from it is closed at
/// once (logged). Peers on one host (a test, the soak) share it.
pub const MAX_SERVER_CONNECTIONS_PER_HOST: usize = 1024;

/// Bytes a ZeroMQ server here holds for all its connections together (input not yet a whole message, output not
/// yet written); a connection that takes the sum over it is closed. With [`MAX_MESSAGE_BYTES`] per message this
/// bounds what many connections sending large messages slowly can make the server hold.
pub const MAX_SERVER_BUFFERED_BYTES: usize = 192 * 1024 * 1024;

/// Longest timeout, lease or delay a flag, configuration or testee command may set, in seconds (a week):
/// longer ones would overflow a deadline (`Instant + Duration`) or wait for ever.
pub const MAX_TIMEOUT_SECS: f64 = 604_800.0;

/// Deepest nesting of containers (arrays, maps, structs), counting the top-level message as 1.
///
/// msgspec has no fixed limit: it fails with `RecursionError` when Python's recursion limit is hit. With the
/// default limit of 1000 and `Decoder.decode` called from module level, msgspec 0.23.0 accepts 997 nested
/// containers in an ignored field and rejects 998 (measured). Inputs nested between roughly 990 and 1000 deep
/// therefore depend on the Python caller's own stack depth; everything outside that band agrees.
pub const MAX_DEPTH: usize = 997;

/// Most elements (array items or map entries) one collection may declare. Each element costs at least one
/// byte, so [`MAX_FRAME_BYTES`] already bounds this; the constant is what preallocation is capped at.
pub const MAX_PREALLOC_ELEMENTS: usize = 4096;

/// Longest line the trace and vector readers accept, in bytes.
pub const MAX_JSONL_LINE_BYTES: usize = 256 * 1024 * 1024;

/// Largest bootstrap HTTP body the reference server accepts, in bytes.
pub const MAX_HTTP_BODY_BYTES: usize = 1024 * 1024;

/// Workers the reference bootstrap server registers, over every engine (vLLM's has no limit): beyond it a new
/// worker is refused with 503 and everyone registered stays, so `GET /query`'s answer is bounded too.
pub const MAX_REGISTERED_WORKERS: usize = 4096;

/// Workers the reference bootstrap server registers for one engine (one `dp_rank`: its TP × PP ranks); beyond it a
/// new worker of that engine is refused with 503.
pub const MAX_WORKERS_PER_ENGINE: usize = 1024;

/// Bytes of `engine_id`s and addresses the reference bootstrap server stores, in all; beyond it a new worker is
/// refused with 503. This keeps `GET /query`'s answer under [`MAX_HTTP_BODY_BYTES`], which is what the decoder
/// here reads (4,096 workers of a UUID and a `host:port` take about 250 KiB).
pub const MAX_REGISTRY_BYTES: usize = 512 * 1024;

/// Largest request body the reference bootstrap server reads, in bytes (a registration is about 200); a larger
/// one is refused with 413.
pub const MAX_HTTP_REQUEST_BODY_BYTES: usize = 16 * 1024;

/// Exchanges the reference bootstrap server keeps in its log (for the conformance runner's checks); the oldest
/// half goes when it is full.
pub const MAX_BOOTSTRAP_LOG_ENTRIES: usize = 4096;

/// Longest `engine_id` or `addr` the reference bootstrap server registers, in bytes (vLLM's are a UUID and a
/// `host:port`); longer is refused with 422.
pub const MAX_REGISTRY_FIELD_BYTES: usize = 1024;

/// Pulls one prefiller serves at once; beyond this a pull is answered ERROR at once (vLLM queues without
/// bound). Each waits at most the abort timeout.
pub const MAX_PREFILLER_EXCHANGES: usize = 65_536;

/// Distinct decoder layouts whose prepared regions a prefiller keeps (the cache is emptied when full).
pub const MAX_PREPARED_LAYOUTS: usize = 1024;

/// Entries each status log of the reference peer keeps (finished transfers, writes, payloads sent...); the
/// oldest half goes when one is full.
pub const MAX_STATUS_RECORDS: usize = 100_000;

/// Expired transfer ids a prefiller remembers to answer a late pull at once (`behaviour.expired_pull`); vLLM keeps
/// them for the abort timeout without a count bound. Beyond this the oldest is forgotten (a pull of it then
/// waits like a pull of an unknown transfer, as before 0.34.0).
pub const MAX_REMEMBERED_EXPIRED: usize = 65_536;

/// Requests one decoder renews leases for at once (`behaviour.lease_renewal`); beyond this a request is not
/// leased (its prefiller keeps it for the lease duration only).
pub const MAX_LEASED_REQUESTS: usize = 65_536;

/// Pulls one decoder keeps open at once; beyond this a pull fails locally.
pub const MAX_DECODER_EXCHANGES: usize = 65_536;

/// Most bytes one transfer-engine write of the reference peer's TCP backend may carry.
pub const MAX_TRANSFER_BYTES: usize = 1 << 30;

/// Most ranks the transfer planner (`plan`) lists for one peer (`handshake_target_ranks`). vLLM builds the list
/// `[rank * ratio + i for i in range(ratio)]` from the peer's declared `remote_tp_size`, so an absurd size would
/// make it allocate without bound; real deployments have at most a few hundred TP ranks.
pub const MAX_PLAN_RANKS: usize = 65_536;
/// Deepest nesting of lists, tuples and dicts (empty ones included) that `hash_factors`, the pickler and the
/// CBOR encoder serialize. CPython has no fixed limit: it raises `RecursionError` when Python's recursion
/// limit (1000) is reached, counting the caller's own frames. Measured with CPython 3.11 calling
/// `json.dumps` from module level: 994 nested containers encode, 995 raise. A caller deeper in the stack
/// (as vLLM's is) fails earlier; values nested that deep are never hashed in practice.
pub const MAX_HASHED_VALUE_DEPTH: usize = 994;

/// Longest store key the key parser accepts, in bytes. Mooncake's own HA operation log caps keys at 4096
/// bytes; vLLM's keys are under 300.
pub const MAX_STORE_KEY_BYTES: usize = 64 * 1024;

/// Most separators (`@`) a parsed store key may contain. A free-text field (a model name) may contain the
/// separator, so parsing tries each one as a field end; real keys have about ten.
pub const MAX_STORE_KEY_SEPARATORS: usize = 256;

/// Most distinct readings of one key the parser collects before it reports the key as ambiguous.
pub const MAX_STORE_KEY_READINGS: usize = 16;

/// Longest Transfer Engine handshake frame (type byte + JSON) the reference peer reads, in bytes: the engine's
/// own default cap (`MC_HANDSHAKE_MAX_LENGTH`, 1 MiB; see `spec/transfer-engine/mooncake.toml`).
pub const MAX_TE_HANDSHAKE_BYTES: usize = 1 << 20;

/// Largest single Transfer Engine TCP request (one header's `size`) the reference peer serves or sends. The
/// engine has no cap of its own beyond the registered buffer; a write must lie inside registered memory anyway.
pub const MAX_TE_REQUEST_BYTES: usize = 1 << 30;

/// Data connections the reference peer's transfer-engine initiator uses at once towards one target (every
/// transfer's lanes together; a transfer beyond it waits for lanes). Without it a burst of writes to one decoder
/// opened four connections per write, over a thousand at once in a test of 10,000 pulls.
pub const MAX_TE_CONNECTIONS_PER_PEER: usize = 32;

/// How many times in a row a libzmq call interrupted by a signal (`EINTR`) is tried again before the error is
/// returned (`mooncake_io::interrupted::retry`). A signal storm that long is not a stray `SIGCHLD`.
pub const MAX_EINTR_RETRIES: usize = 1000;

/// Regions (and layer indices) a pull-family worker registers; beyond, its layout is refused. A large model
/// registers a few hundred (K and V of every layer).
pub const MAX_PULL_REGIONS: usize = 65_536;

/// Requests a pull-family prefiller tracks at once (finished prefilling, not yet completed or expired); beyond,
/// a new one is freed at once as expired (vllm-ascend tracks without bound; each waits at most the abort
/// timeout).
pub const MAX_PULL_TRACKED: usize = 1_048_576;

/// Requests a pull-family decoder holds waiting for their turn (it serves them one at a time, as vllm-ascend's
/// receiving thread does); beyond, a new one is reported failed at once.
pub const MAX_PULL_QUEUE: usize = 65_536;

/// Descriptors in one read a pull-family decoder plans (regions × runs of blocks); beyond, the read fails
/// without calling the engine.
pub const MAX_PULL_DESCRIPTORS: usize = 1 << 22;
