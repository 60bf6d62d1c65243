//! `[behaviour]`: what a peer can observe of a revision beyond its structs — how the prefiller answers, what
//! it frees and when, how it plans the copies, what the decoder reports after each kind of reply — as closed,
//! typed values. Every item is `{ value, source, doc }`; a value that is not one of the item's variants (a typo)
//! fails loading the spec. The sans-IO cores take their behaviour from these values and from nothing else.
//!
//! A derived revision changes an item with `op = "set"`, `at = "behaviour.<item>"` and the plain `value`; the
//! edit's `source` (or, without one, the revision's) becomes the item's source (`tree::apply_edit`).
//!
//! Protocol prose for each item: `spec/PROTOCOL.md` (§ "Behaviour items").

use serde::{Deserialize, Serialize};

/// One behaviour item: a typed value and where it was read.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Item<T> {
    /// The value the revision states.
    pub value: T,
    /// Release and file (and function) the value was read from.
    pub source: String,
    /// What the value means for this revision, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub doc: String,
    /// Why a derived revision changed it (from the edit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The revision that gave this value (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub since: String,
}

macro_rules! closed_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
        pub enum $name {
            $(
                $(#[$vm])*
                #[doc = ""]
                #[doc = concat!("Written `", $s, "` in the spec files.")]
                #[serde(rename = $s)]
                $v,
            )+
        }
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The spelling in the spec files.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s,)+ }
            }
        }
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// Writes [`Behaviour`] and [`BehaviourKey`] from one list of items: `field / Key: value type, group;`.
macro_rules! behaviour_items {
    ($($(#[$m:meta])* $field:ident / $key:ident : $ty:ty, $group:ident;)+) => {
        /// Every behaviour item a revision may state. Which ones a revision must state depends on its family and
        /// generation (`Behaviour::missing`).
        #[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct Behaviour {
            $(
                $(#[$m])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<Item<$ty>>,
            )+
        }

        /// The name of one behaviour item: a field of [`Behaviour`], spelled in the spec files as
        /// [`BehaviourKey::name`]. Code that treats items one by one matches on this enum exhaustively, so an
        /// item added to the spec does not compile until each such place has decided what it means there.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum BehaviourKey {
            $(
                $(#[$m])*
                $key,
            )+
        }

        impl BehaviourKey {
            /// Every item, in declaration order (the order of [`Behaviour`]'s fields and of the spec's tables).
            pub const ALL: &'static [BehaviourKey] = &[$(BehaviourKey::$key),+];

            /// The item's name as the spec files spell it (`[behaviour.<name>]`, `at = "behaviour.<name>"`), which
            /// is also the name of its field of [`Behaviour`].
            pub const fn name(self) -> &'static str {
                match self {
                    $(BehaviourKey::$key => stringify!($field),)+
                }
            }

            /// Which table of `spec/README.md` ("Behaviour items") the item belongs to.
            pub const fn group(self) -> Group {
                match self {
                    $(BehaviourKey::$key => Group::$group,)+
                }
            }
        }

        impl Behaviour {
            /// Item `key` as this revision states it, or `None` when it does not.
            pub fn item(&self, key: BehaviourKey) -> Option<ItemView<'_>> {
                match key {
                    $(BehaviourKey::$key => self.$field.as_ref().map(ItemView::of),)+
                }
            }
        }
    };
}

/// The groups of behaviour items (`spec/README.md`, "Behaviour items").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// What a prefiller answers and frees, and when.
    Replies,
    /// How a prefiller plans its copies: the same bytes land, in other descriptors.
    Planning,
    /// What a decoder does and reports.
    Decoder,
}

impl Group {
    /// The side whose behaviour the item describes.
    pub fn is_decoder(self) -> bool {
        self == Group::Decoder
    }
}

/// One stated item, its value as the spec spells it (JSON), untyped for code that treats every item alike.
#[derive(Clone, Debug, PartialEq)]
pub struct ItemView<'a> {
    /// The value as the spec spells it.
    pub value: serde_json::Value,
    /// Release and file (and function) the value was read from.
    pub source: &'a str,
    /// The revision that gave this value (stamped when the spec is resolved).
    pub since: &'a str,
}

impl<'a> ItemView<'a> {
    fn of<T: Serialize>(i: &'a Item<T>) -> Self {
        ItemView { value: serde_json::to_value(&i.value).unwrap_or_default(), source: &i.source, since: &i.since }
    }
}

impl BehaviourKey {
    /// The item named `name` as the spec spells it.
    pub fn from_name(name: &str) -> Option<BehaviourKey> {
        BehaviourKey::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// The item a diff subject (`behaviour.<name>`) is about.
    pub fn of_subject(subject: &str) -> Option<BehaviourKey> {
        subject.strip_prefix("behaviour.").and_then(BehaviourKey::from_name)
    }

    /// Whether every push revision of `generation` must state the item (`Behaviour::missing`).
    pub fn push_required(self, generation: u32) -> bool {
        use BehaviourKey::*;
        match self {
            UnknownTransfer | ReadyWait | TransferFailure | BlockCountFailure | NeedSend | EmptyWrite
            | LayoutCaching | KvLeases | ExpiredPull | RegionAlignment | KvHalfSplit | BlockGroups
            | DestinationStride | TpBytePlan | ReplicatedProducer | RegionCoalescing | PairedBlockOrder
            | DecoderAddressing | FailureReport | FailureFinish | FreeOnlySuccess | LeaseRenewal => true,
            // Generation 1 has no such rules.
            ReplyRounds
            | EmptyIdLists
            | PairingCheck
            | HeterogeneousTp
            | UndecodableRequest
            | RequiredKvLayout
            | UnreportedAfterFinish
            | UnknownOkId
            | DecoderPpTargets => generation != 1,
            // Stated only by revisions that check layout lengths or use sentinels.
            EqualLengthFields | MinusOneSentinels => false,
            // The pull family's (`BehaviourKey::pull_required`).
            FailedRead => false,
        }
    }
}

impl BehaviourKey {
    /// Whether every pull revision of `generation` must state the item (`Behaviour::missing`): generation 1
    /// (vllm-ascend's released connector) states how its decoder reports a failed read.
    pub fn pull_required(self, generation: u32) -> bool {
        matches!(self, BehaviourKey::FailedRead) && generation == 1
    }
}

impl std::fmt::Display for BehaviourKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// ---- prefiller: replies and bookkeeping ----------------------------------------------------------------------

closed_enum!(
    /// How a generation-2 prefiller answers one round of ready requests.
    ReplyRounds {
        /// A round with per-request failures first sends `{err_reqs, err_msg}`, then the ok reply listing every
        /// ready id again (failed ones included); a failed write sends only an error reply listing every id.
        ErrThenOk = "err-then-ok",
        /// Exactly one reply per round carrying both lists.
        OnePerRound = "one-per-round",
    }
);

closed_enum!(
    /// How a prefiller writes an empty `ok_reqs` in an ok reply.
    EmptyIdLists {
        /// Always an array, `[]` (byte `90`) when empty.
        EmptyArray = "empty-array",
        /// Omitted (`None`) when empty; `err_reqs` likewise.
        Omitted = "omitted",
    }
);

closed_enum!(
    /// Which TP rank a generation-2 prefiller tests against the ranks it pairs with.
    PairingCheck {
        /// Its own rank (the decoder's `remote_tp_rank` is never read).
        Own = "own",
        /// The decoder's `remote_tp_rank`.
        Remote = "remote",
    }
);

closed_enum!(
    /// Whether prefiller and decoder may run different TP sizes.
    HeterogeneousTp {
        /// Not supported: a prefiller raises "Mooncake: Heterogeneous TP is not supported yet." when a request
        /// of a pull from a larger decoder TP first becomes ready; a decoder with a smaller TP than the
        /// prefiller raises before sending anything.
        RefusedWhenReady = "refused-when-ready",
        /// Supported both ways.
        Supported = "supported",
    }
);

closed_enum!(
    /// What a prefiller does with a pulled request whose transfer-engine write failed.
    TransferFailure {
        /// Not counted as a delivery: the request stays ready and is freed only when it expires.
        KeptUntilExpiry = "kept-until-expiry",
        /// Never freed: it no longer expires (generation 1).
        KeptForever = "kept-forever",
    }
);

closed_enum!(
    /// What a prefiller does with a request whose block counts do not fit (`P num blocks less than D`,
    /// `KV group count mismatch`).
    BlockCountFailure {
        /// Listed as failed, yet counted as delivered (it is in the ok reply too): freed.
        CountedAsDelivered = "counted-as-delivered",
        /// Listed as failed, not counted: freed when it expires.
        KeptUntilExpiry = "kept-until-expiry",
        /// The whole message fails (`trans_error`), nothing is written (generation 1).
        FailsMessage = "fails-message",
    }
);

closed_enum!(
    /// What a prefiller does with a pulled transfer it does not know, or that is not ready yet.
    UnknownTransfer {
        /// A placeholder is waited on, as if the request were allocated (generation 2).
        WaitAsPlaceholder = "wait-as-placeholder",
        /// The message stops at the first unknown id and is answered as done, nothing written; the ids before
        /// it no longer expire (generation 1).
        DoneAtFirstUnknown = "done-at-first-unknown",
    }
);

closed_enum!(
    /// How long a prefiller waits for requests of a pull to become ready.
    ReadyWait {
        /// Up to the abort timeout per round (the timer restarts after every round with progress); then one
        /// FINISH with the still pending ids in `err_reqs`.
        AbortTimeoutPerRound = "abort-timeout-per-round",
        /// Without a bound (generation 1): no reply until the request is ready.
        Unbounded = "unbounded",
    }
);

closed_enum!(
    /// How many deliveries free a prefiller request.
    NeedSend {
        /// One per decoder TP rank this prefiller rank pairs with.
        TpTargets = "tp-targets",
        /// That, times the decoder's PP size when it exceeds 1 and differs from the prefiller's.
        TpTargetsTimesDecoderPp = "tp-targets-times-decoder-pp",
        /// One: every successful message frees the requests it names (generation 1).
        One = "one",
    }
);

closed_enum!(
    /// Whether the transfer engine is called for a message (or round) with nothing to copy.
    EmptyWrite {
        /// No call.
        Skipped = "skipped",
        /// One call with zero descriptors (generation 1).
        Called = "called",
    }
);

closed_enum!(
    /// KV-cache layout `get_required_kvcache_layout` asks of both sides (non-MLA models).
    KvLayout {
        /// None declared.
        None = "none",
        Hnd = "HND",
        Lbhnc = "LBHNC",
    }
);

// ---- prefiller: transfer planning -----------------------------------------------------------------------------

closed_enum!(
    /// How a prefiller pairs its registered regions with the decoder's.
    RegionAlignment {
        /// Position by position, truncated to the shorter list, no check.
        Zip = "zip",
        /// Position by position; the counts must match ("Mooncake asymmetric TP requires matching KV region
        /// counts between producer and consumer.").
        ByPosition = "by-position",
        /// By (layer name, occurrence); every prefiller region needs its decoder region, layer indices (and,
        /// when sent, group indices) must match.
        ByLayerName = "by-layer-name",
        /// By layer name; prefiller layers the decoder lacks are skipped when the decoder's PP size exceeds 1 and
        /// differs from the prefiller's.
        ByLayerNamePartialAcrossDecoderPp = "by-layer-name-partial-across-decoder-pp",
        /// By layer name; prefiller layers the decoder lacks are skipped whenever the PP sizes differ.
        ByLayerNamePartialAcrossPp = "by-layer-name-partial-across-pp",
    }
);

closed_enum!(
    /// Whether a prefiller splits each registered region into K and V halves (one descriptor per block).
    KvHalfSplit {
        Never = "never",
        /// When its own attention layout is blocks-first (`[blocks, 2, ...]`), both sides' regions.
        WhenBlocksFirst = "when-blocks-first",
        /// Only in Mamba-hybrid models.
        MambaHybridOnly = "mamba-hybrid-only",
    }
);

closed_enum!(
    /// Which of a request's block ids a region's copies use.
    BlockGroups {
        /// One flat list per request.
        Single = "single",
        /// The concatenation of every group's list, for every region.
        Flattened = "flattened",
        /// The list of the region's own KV group.
        PerGroup = "per-group",
    }
);

closed_enum!(
    /// Which block length places a block in each side's region.
    DestinationStride {
        /// The prefiller's own block length for both sides (the decoder's is not on the wire).
        ProducerBlockLen = "producer-block-len",
        /// Each side's own `block_lens`.
        EachSidesBlockLen = "each-sides-block-len",
    }
);

closed_enum!(
    /// Which bytes of a block a prefiller rank copies when TP sizes differ.
    TpBytePlan {
        /// The whole block, always.
        WholeBlock = "whole-block",
        /// `_compute_sender_transfer_plan` (offset and slice by TP ratio).
        SenderPlan = "sender-plan",
        /// The same with KV-head re-sharding when only one side replicates heads.
        SenderPlanHeadResharding = "sender-plan-head-resharding",
    }
);

closed_enum!(
    /// When a prefiller counts its cache as replicated (every rank holds all KV heads).
    ReplicatedProducer {
        /// Never considered.
        NotConsidered = "not-considered",
        /// MLA, or TP size at least the number of KV heads.
        TpAtLeastHeads = "tp-at-least-heads",
        /// MLA, or TP size above the number of KV heads.
        TpAboveHeads = "tp-above-heads",
        /// As above; region lengths are validated with both TP sizes clamped to the head count.
        ClampedToHeads = "clamped-to-heads",
    }
);

closed_enum!(
    /// Whether aligned regions adjacent in memory are merged into one span before planning.
    RegionCoalescing {
        None = "none",
        AdjacentInRow = "adjacent-in-row",
    }
);

// ---- decoder ------------------------------------------------------------------------------------------------

closed_enum!(
    /// What a decoder reports for a request whose pull failed (err_reqs, ERROR, a socket error, a timeout, an
    /// engine missing from `/query`).
    FailureReport {
        /// Nothing (it is only logged).
        None = "none",
        /// Its destination blocks as invalid (`get_block_ids_with_load_errors`).
        InvalidBlocks = "invalid-blocks",
        /// Its blocks as invalid, or with several KV groups, the request as failed (`failed_recving`).
        InvalidBlocksOrFailedRecving = "invalid-blocks-or-failed-recving",
    }
);

closed_enum!(
    /// When a decoder reports a failed request as finished receiving.
    FailureFinish {
        /// Never: the request stays waiting for remote KV.
        Never = "never",
        /// At once, at the first failure any prefiller worker reports (also a request already reported finished).
        AtFirstFailure = "at-first-failure",
        /// Once every contacted prefiller worker has settled it.
        WhenEveryPeerSettled = "when-every-peer-settled",
    }
);

closed_enum!(
    /// What a decoder reports for a free-only pull (no blocks) that succeeded.
    FreeOnlySuccess {
        Finished = "finished",
        Unreported = "unreported",
    }
);

closed_enum!(
    /// What a decoder does with requests of a pull that a FINISH left unreported.
    UnreportedAfterFinish {
        /// Nothing: they keep waiting.
        Ignored = "ignored",
        /// Failed ("peer finished without reporting a transfer result").
        Failed = "failed",
    }
);

closed_enum!(
    /// What a decoder does with an id in `ok_reqs` that is not a request of the pull.
    UnknownOkId {
        /// The exchange fails (vLLM raises `KeyError`); the failure path of `failure_report` applies.
        FailsExchange = "fails-exchange",
        /// Ignored.
        Ignored = "ignored",
    }
);

closed_enum!(
    /// Which prefiller PP ranks a decoder contacts for a target TP rank.
    DecoderPpTargets {
        /// Only PP rank 0.
        PpRankZero = "pp-rank-zero",
        /// Its own PP rank when both sides have the same PP size, else every PP rank.
        MatchingOrAll = "matching-or-all",
    }
);

closed_enum!(
    /// How a decoder addresses prefiller workers.
    DecoderAddressing {
        /// `remote_host : remote_port + own TP rank` from `kv_transfer_params`, one REQ per (step, address).
        FixedPortPlusTpRank = "fixed-port-plus-tp-rank",
        /// The addresses `GET /query` lists for the engine, one DEALER per (pull, address).
        BootstrapQuery = "bootstrap-query",
    }
);

closed_enum!(
    /// What a generation-2 prefiller answers to a payload its request decoder rejects (a message of another
    /// revision, a truncated or foreign payload).
    UndecodableRequest {
        /// One answer of the request's answer struct with status ERROR and the decoder's error text (msgspec's
        /// ``Object missing required field `remote_hostname` ``) as its text; the connection stays usable.
        ErrorReply = "error-reply",
    }
);

closed_enum!(
    /// In which order a prefiller plans the (own, decoder) block pairs of a request.
    PairedBlockOrder {
        /// As the request lists them: a run that descends by one on both sides is one descriptor per block.
        AsGiven = "as-given",
        /// Runs that descend by one on both sides are reversed (pairs kept) before kernel expansion, so they
        /// coalesce like ascending runs (0.34.0).
        DescendingRunsReversed = "descending-runs-reversed",
    }
);

closed_enum!(
    /// How long a prefiller remembers a transfer id that expired, to answer a late pull of it at once.
    RememberedFor {
        /// `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` seconds after the expiry (pruned when the prefiller next
        /// reports what it finished sending); a pull later than that waits like a pull of an unknown transfer.
        AbortTimeout = "abort-timeout",
    }
);

closed_enum!(
    /// What a pull-family decoder reports for a request whose transfer-engine read failed (it sends its
    /// completion all the same, and the prefiller frees the request).
    FailedRead {
        /// Finished receiving and nothing else: no load error, so the scheduler goes on with blocks the read
        /// never wrote (vllm-ascend 0.18.0).
        Silent = "silent",
        /// Finished receiving, and its destination blocks reported through `get_block_ids_with_load_errors`
        /// (vllm-ascend 0.23.0.post1).
        LoadErrors = "load-errors",
    }
);

// ---- bootstrap ------------------------------------------------------------------------------------------------

closed_enum!(
    /// What `POST /register` does with a (dp, tp, pp) slot that is already registered.
    DuplicateRegistration {
        /// HTTP 400 even when the address is the same.
        Reject = "reject",
        /// 200 when the address is the same, 400 otherwise.
        AcceptIdentical = "accept-identical",
    }
);

/// The layout fields a prefiller requires to have equal lengths whenever a layout is carried, and the error it
/// answers otherwise (`{field}` placeholders take each field's length, in list order: `{0}`, `{1}`, …).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EqualLengthFields {
    /// The layout fields whose lengths must agree, in message order.
    pub fields: Vec<String>,
    /// The error text, with `{0}`, `{1}`, … for the fields' lengths.
    pub message: String,
}

impl EqualLengthFields {
    /// The error text for these lengths (one per field).
    pub(crate) fn message_for(&self, lens: &[usize]) -> String {
        let mut s = self.message.clone();
        for (i, n) in lens.iter().enumerate() {
            s = s.replace(&format!("{{{i}}}"), &n.to_string());
        }
        s
    }
}

/// `layout_id` caching (0.33.0).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutCaching {
    /// How many aligned layouts a prefiller keeps (emptied when full).
    pub max_peer_layouts: usize,
    /// The pull fields that key a cached layout (host, port, TP rank, PP size, TP size, `layout_id`).
    pub cache_key: Vec<String>,
    /// The layout columns a layout-less pull leaves out.
    pub layout_fields: Vec<String>,
    /// The status that answers a layout-less pull whose layout is not cached (`LAYOUT_MISS`).
    pub miss_status: String,
    /// Its `err_msg`, with `{layout_id:#x}`, `{host}` and `{port}` placeholders.
    pub miss_message: String,
}

/// An item that is `false` in revisions without the feature, or the feature's description.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum OffOr<T> {
    /// Must be `false` (the loader refuses `true`).
    Off(bool),
    /// The feature.
    On(T),
}

impl<T> Default for OffOr<T> {
    fn default() -> Self {
        OffOr::Off(false)
    }
}

impl<T> OffOr<T> {
    /// The feature, when the revision has it.
    pub fn get(&self) -> Option<&T> {
        match self {
            OffOr::On(l) => Some(l),
            OffOr::Off(_) => None,
        }
    }
    /// `true` where the spec says `true`, which it must never say (only `false` or the description).
    pub(crate) fn is_true(&self) -> bool {
        matches!(self, OffOr::Off(true))
    }
}

/// `layout_caching`: `false`, or the cache (`spec/PROTOCOL.md`, "Layout caching (0.33.0)").
pub type LayoutCachingSpec = OffOr<LayoutCaching>;

/// A fraction of `kv_lease_duration`: `[numerator, denominator]`.
pub type Fraction = [u32; 2];

/// `kv_leases` (0.34.0): how a prefiller holds a finished request's blocks under a lease and answers a
/// `MooncakeLeaseHeartbeat` (`spec/PROTOCOL.md`, "KV leases (0.34.0)"). The lease is on when the deployment sets
/// `config_key` in `kv_connector_extra_config`; the heartbeat is recognised and answered either way.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvLeases {
    /// The `kv_connector_extra_config` key that sets the lease duration in seconds (a positive number).
    pub config_key: String,
    /// A heartbeat moves each named transfer's deadline to at least `now + duration × renew_to`.
    pub renew_to: Fraction,
    /// The status of the reply to a heartbeat when leases are on (no other field set).
    pub renewed_status: String,
    /// The status of the reply to a heartbeat when this prefiller has no lease duration.
    pub off_status: String,
    /// Its `err_msg`.
    pub off_message: String,
}

/// `expired_pull` (0.34.0): a pull of a transfer the prefiller expired is answered at once.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExpiredPull {
    /// The `err_msg` of the reply that lists the expired requests in `err_reqs` (status CONTINUE when other
    /// requests of the pull are still pending, else FINISH; `layout_id` echoed).
    pub message: String,
    /// How long an expired transfer id is remembered.
    pub remembered_for: RememberedFor,
}

/// `lease_renewal` (0.34.0): how a decoder renews the leases of the requests it has not pulled yet.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseRenewal {
    /// The `kv_connector_extra_config` key that turns renewal on (the same key and value as the prefiller's).
    pub config_key: String,
    /// One heartbeat per prefiller engine every `duration × interval`, naming every leased transfer of it.
    pub interval: Fraction,
    /// How long it waits for each worker's reply (`RCVTIMEO`): `duration × reply_timeout`.
    pub reply_timeout: Fraction,
}

// Every item: its field of `Behaviour`, its `BehaviourKey` variant, its value type and its group. A new item
// is a field of the struct and a variant of the key at once, and every exhaustive `match` on the key (the
// diff, the cross-version evidence, the matrix's prediction) must then decide what to do with it.
behaviour_items! {
    // prefiller, replies and bookkeeping
    /// How a generation-2 prefiller answers one round of ready requests.
    reply_rounds / ReplyRounds: ReplyRounds, Replies;
    /// How a prefiller writes an empty `ok_reqs` in an ok reply.
    empty_id_lists / EmptyIdLists: EmptyIdLists, Replies;
    /// Which TP rank a generation-2 prefiller tests against the ranks it pairs with.
    pairing_check / PairingCheck: PairingCheck, Replies;
    /// Whether prefiller and decoder may run different TP sizes.
    heterogeneous_tp / HeterogeneousTp: HeterogeneousTp, Replies;
    /// What a prefiller does with a pulled request whose transfer-engine write failed.
    transfer_failure / TransferFailure: TransferFailure, Replies;
    /// What a prefiller does with a request whose block counts do not fit (`P num blocks less than D`,
    /// `KV group count mismatch`).
    block_count_failure / BlockCountFailure: BlockCountFailure, Replies;
    /// What a prefiller does with a pulled transfer it does not know, or that is not ready yet.
    unknown_transfer / UnknownTransfer: UnknownTransfer, Replies;
    /// What a generation-2 prefiller answers to a payload its request decoder rejects.
    undecodable_request / UndecodableRequest: UndecodableRequest, Replies;
    /// How long a prefiller waits for requests of a pull to become ready.
    ready_wait / ReadyWait: ReadyWait, Replies;
    /// How many deliveries free a prefiller request.
    need_send / NeedSend: NeedSend, Replies;
    /// Whether the transfer engine is called for a message (or round) with nothing to copy.
    empty_write / EmptyWrite: EmptyWrite, Replies;
    /// KV-cache layout `get_required_kvcache_layout` asks of both sides (non-MLA models).
    required_kv_layout / RequiredKvLayout: KvLayout, Replies;
    /// The layout fields a prefiller requires to have equal lengths whenever a layout is carried, and the error
    /// it answers otherwise.
    equal_length_fields / EqualLengthFields: EqualLengthFields, Replies;
    /// Fields in which `-1` is a sentinel, not an index.
    minus_one_sentinels / MinusOneSentinels: Vec<String>, Replies;
    /// `layout_id` caching (0.33.0): off, or the cache (`spec/PROTOCOL.md`, "Layout caching (0.33.0)").
    layout_caching / LayoutCaching: LayoutCachingSpec, Replies;
    /// KV leases and heartbeats (0.34.0): off, or how the prefiller holds, renews and answers
    /// (`spec/PROTOCOL.md`, "KV leases (0.34.0)").
    kv_leases / KvLeases: OffOr<KvLeases>, Replies;
    /// A pull of an expired transfer (0.34.0): off (it waits like an unknown one), or answered at once.
    expired_pull / ExpiredPull: OffOr<ExpiredPull>, Replies;
    // prefiller, planning
    /// How a prefiller pairs its registered regions with the decoder's.
    region_alignment / RegionAlignment: RegionAlignment, Planning;
    /// Whether a prefiller splits each registered region into K and V halves (one descriptor per block).
    kv_half_split / KvHalfSplit: KvHalfSplit, Planning;
    /// Which of a request's block ids a region's copies use.
    block_groups / BlockGroups: BlockGroups, Planning;
    /// Which block length places a block in each side's region.
    destination_stride / DestinationStride: DestinationStride, Planning;
    /// Which bytes of a block a prefiller rank copies when TP sizes differ.
    tp_byte_plan / TpBytePlan: TpBytePlan, Planning;
    /// When a prefiller counts its cache as replicated (every rank holds all KV heads).
    replicated_producer / ReplicatedProducer: ReplicatedProducer, Planning;
    /// Whether aligned regions adjacent in memory are merged into one span before planning.
    region_coalescing / RegionCoalescing: RegionCoalescing, Planning;
    /// In which order a prefiller plans a request's block pairs.
    paired_block_order / PairedBlockOrder: PairedBlockOrder, Planning;
    // decoder
    /// How a decoder addresses prefiller workers.
    decoder_addressing / DecoderAddressing: DecoderAddressing, Decoder;
    /// What a decoder reports for a request whose pull failed (`err_reqs`, `ERROR`, a socket error, a timeout,
    /// an engine missing from `/query`).
    failure_report / FailureReport: FailureReport, Decoder;
    /// When a decoder reports a failed request as finished receiving.
    failure_finish / FailureFinish: FailureFinish, Decoder;
    /// What a decoder reports for a free-only pull (no blocks) that succeeded.
    free_only_success / FreeOnlySuccess: FreeOnlySuccess, Decoder;
    /// What a decoder does with requests of a pull that a FINISH left unreported.
    unreported_after_finish / UnreportedAfterFinish: UnreportedAfterFinish, Decoder;
    /// What a decoder does with an id in `ok_reqs` that is not a request of the pull.
    unknown_ok_id / UnknownOkId: UnknownOkId, Decoder;
    /// Which prefiller PP ranks a decoder contacts for a target TP rank.
    decoder_pp_targets / DecoderPpTargets: DecoderPpTargets, Decoder;
    /// Lease renewal (0.34.0): off, or how the decoder renews.
    lease_renewal / LeaseRenewal: OffOr<LeaseRenewal>, Decoder;
    /// What a pull-family decoder reports for a request whose transfer-engine read failed.
    failed_read / FailedRead: FailedRead, Decoder;
}

impl Behaviour {
    /// The items a revision of this family and generation must state but does not, in declaration order.
    pub(crate) fn missing(&self, family: &str, generation: u32) -> Vec<BehaviourKey> {
        let required = |k: BehaviourKey| match family {
            "push" => k.push_required(generation),
            "pull" => k.pull_required(generation),
            _ => false,
        };
        BehaviourKey::ALL.iter().copied().filter(|k| required(*k) && self.item(*k).is_none()).collect()
    }

    /// The items this revision states.
    #[cfg(test)]
    pub(crate) fn present(&self) -> Vec<BehaviourKey> {
        BehaviourKey::ALL.iter().copied().filter(|k| self.item(*k).is_some()).collect()
    }

    /// `layout_caching`, when on.
    pub(crate) fn layout_caching(&self) -> Option<&LayoutCaching> {
        self.layout_caching.as_ref().and_then(|i| i.value.get())
    }

    /// `kv_leases`, when the revision has them.
    pub(crate) fn kv_leases(&self) -> Option<&KvLeases> {
        self.kv_leases.as_ref().and_then(|i| i.value.get())
    }

    /// `expired_pull`, when the revision answers such pulls at once.
    pub(crate) fn expired_pull(&self) -> Option<&ExpiredPull> {
        self.expired_pull.as_ref().and_then(|i| i.value.get())
    }

    /// `lease_renewal`, when the revision's decoder renews leases.
    pub(crate) fn lease_renewal(&self) -> Option<&LeaseRenewal> {
        self.lease_renewal.as_ref().and_then(|i| i.value.get())
    }

    /// Every stated item as (key, value as the spec spells it, source), in declaration order.
    pub fn rows(&self) -> Vec<(BehaviourKey, serde_json::Value, String)> {
        BehaviourKey::ALL.iter().filter_map(|k| self.item(*k).map(|i| (*k, i.value, i.source.to_string()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_names_are_the_struct_keys() {
        // A Behaviour with every item set serialises to exactly the keys' names.
        let src = |v: serde_json::Value| serde_json::json!({"value": v, "source": "s"});
        let mut all = serde_json::Map::new();
        for k in BehaviourKey::ALL {
            let v = match k.name() {
                "equal_length_fields" => serde_json::json!({"fields": [], "message": ""}),
                "minus_one_sentinels" => serde_json::json!([]),
                "layout_caching" | "kv_leases" | "expired_pull" | "lease_renewal" => serde_json::json!(false),
                _ => serde_json::Value::Null,
            };
            all.insert(k.to_string(), src(v));
        }
        // Enum items need a real value: take the first variant of each by trying them all.
        let b: Result<Behaviour, _> = serde_json::from_value(serde_json::Value::Object(all.clone()));
        assert!(b.is_err(), "null is not a variant of any enum item");
        let fixes: &[(&str, &str)] = &[
            ("reply_rounds", ReplyRounds::ALL[0].as_str()),
            ("empty_id_lists", EmptyIdLists::ALL[0].as_str()),
            ("pairing_check", PairingCheck::ALL[0].as_str()),
            ("heterogeneous_tp", HeterogeneousTp::ALL[0].as_str()),
            ("transfer_failure", TransferFailure::ALL[0].as_str()),
            ("block_count_failure", BlockCountFailure::ALL[0].as_str()),
            ("unknown_transfer", UnknownTransfer::ALL[0].as_str()),
            ("undecodable_request", UndecodableRequest::ALL[0].as_str()),
            ("ready_wait", ReadyWait::ALL[0].as_str()),
            ("need_send", NeedSend::ALL[0].as_str()),
            ("empty_write", EmptyWrite::ALL[0].as_str()),
            ("required_kv_layout", KvLayout::ALL[0].as_str()),
            ("region_alignment", RegionAlignment::ALL[0].as_str()),
            ("kv_half_split", KvHalfSplit::ALL[0].as_str()),
            ("block_groups", BlockGroups::ALL[0].as_str()),
            ("destination_stride", DestinationStride::ALL[0].as_str()),
            ("tp_byte_plan", TpBytePlan::ALL[0].as_str()),
            ("replicated_producer", ReplicatedProducer::ALL[0].as_str()),
            ("region_coalescing", RegionCoalescing::ALL[0].as_str()),
            ("paired_block_order", PairedBlockOrder::ALL[0].as_str()),
            ("decoder_addressing", DecoderAddressing::ALL[0].as_str()),
            ("failure_report", FailureReport::ALL[0].as_str()),
            ("failure_finish", FailureFinish::ALL[0].as_str()),
            ("free_only_success", FreeOnlySuccess::ALL[0].as_str()),
            ("unreported_after_finish", UnreportedAfterFinish::ALL[0].as_str()),
            ("unknown_ok_id", UnknownOkId::ALL[0].as_str()),
            ("decoder_pp_targets", DecoderPpTargets::ALL[0].as_str()),
            ("failed_read", FailedRead::ALL[0].as_str()),
        ];
        for (k, v) in fixes {
            all.insert(k.to_string(), src(serde_json::json!(v)));
        }
        let b: Behaviour = serde_json::from_value(serde_json::Value::Object(all)).unwrap();
        assert_eq!(b.present(), BehaviourKey::ALL);
        let mut keys: Vec<String> = serde_json::to_value(&b).unwrap().as_object().unwrap().keys().cloned().collect();
        keys.sort_unstable();
        let mut names: Vec<&str> = BehaviourKey::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        assert_eq!(keys, names);
        assert!(b.missing("push", 2).is_empty() && b.missing("push", 1).is_empty());
    }

    #[test]
    fn keys_and_groups_are_the_spec_readmes() {
        // spec/README.md's table "Behaviour items" names every item in its group, and PROTOCOL.md describes each.
        let readme = include_str!("../../spec/README.md");
        // (The name in two parts: the citation check of tests/suite/protocol_doc.rs reads a quote after it as a
        // cited section title.)
        let protocol = include_str!(concat!("../../spec/PROTOCOL", ".md"));
        let names = |row: &str| -> Vec<String> {
            let items = row.split('|').nth(2).unwrap_or_default();
            items.split('`').skip(1).step_by(2).map(str::to_string).collect()
        };
        for (title, group) in [
            ("| prefiller replies and bookkeeping |", Group::Replies),
            ("| prefiller planning |", Group::Planning),
            ("| decoder |", Group::Decoder),
        ] {
            let row = readme.lines().find(|l| l.starts_with(title)).expect(title);
            let want: Vec<&str> = BehaviourKey::ALL.iter().filter(|k| k.group() == group).map(|k| k.name()).collect();
            assert_eq!(names(row), want, "{title}");
        }
        for k in BehaviourKey::ALL {
            assert!(protocol.contains(&format!("* `{k}` — ")), "PROTOCOL.md does not describe `{k}`");
            assert_eq!(BehaviourKey::from_name(k.name()), Some(*k));
            assert_eq!(BehaviourKey::of_subject(&format!("behaviour.{k}")), Some(*k));
        }
    }

    #[test]
    fn a_typo_is_not_a_value() {
        let e =
            serde_json::from_value::<Item<ReplyRounds>>(serde_json::json!({"value": "one-per-rounds", "source": "s"}))
                .unwrap_err();
        assert!(
            e.to_string().contains("unknown variant `one-per-rounds`, expected `err-then-ok` or `one-per-round`"),
            "{e}"
        );
        let e = serde_json::from_value::<Behaviour>(
            serde_json::json!({"reply_round": {"value": "one-per-round", "source": "s"}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `reply_round`"), "{e}");
    }

    #[test]
    fn equal_length_messages_fill_their_placeholders() {
        let e = EqualLengthFields { fields: vec!["a".into(), "b".into()], message: "got {0} and {1}.".into() };
        assert_eq!(e.message_for(&[2, 3]), "got 2 and 3.");
    }
}
