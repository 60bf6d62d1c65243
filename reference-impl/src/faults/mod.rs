//! Deliberate faults the reference peer can be started with, so the conformance runner's own tests can prove
//! that each kind of deviation fails a case with a finding that names it (the mutation suite:
//! `conformance/CHECKS.md` § Mutation suite, `conformance/tests/suite/mutation.rs`). Never enabled unless a
//! role's start config asks for it (`"faults": [...]`; not part of the testee protocol proper);
//! `mooncake-peer faults` lists them.
//!
//! Where a fault acts: on the wire ([`wire`]: replies, requests, registrations), in what the testee reports to
//! the runner for its scheduler ([`report`]: finished, failed, invalid blocks, freed, its tables, its memory),
//! in the bootstrap server's answers ([`bootstrap`]), in a decoder's transfer-engine handshake answer ([`te`]), or on the process ([`Fault::CrashOnStatus`],
//! [`Fault::HangOnStatus`], in [`crate::testee`]).

pub mod bootstrap;
pub mod report;
pub mod te;
pub mod wire;

pub use wire::{apply_to_enveloped_reply, apply_to_reply, apply_to_request};

use mooncake_testee_protocol::Role;

use crate::error::UnknownFault;

/// Writes the [`Fault`] enum, its names, roles and descriptions from one table (each fault once).
macro_rules! faults {
    ($($(#[doc = $doc:literal])+ $variant:ident = $name:literal in [$($role:ident),+];)+) => {
        /// One deliberate deviation; see the module's documentation.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Fault {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl Fault {
            /// Every fault, in the table's order.
            pub const ALL: &'static [Fault] = &[$(Fault::$variant),+];

            /// Its config name (snake case).
            pub fn name(self) -> &'static str {
                match self {
                    $(Fault::$variant => $name,)+
                }
            }

            /// The roles it acts in (in any other role's config it does nothing).
            pub fn roles(self) -> &'static [Role] {
                match self {
                    $(Fault::$variant => &[$(Role::$role),+],)+
                }
            }

            /// What it does (its documentation).
            pub fn what(self) -> String {
                match self {
                    $(Fault::$variant => [$($doc.trim()),+].join(" "),)+
                }
            }
        }
    };
}

faults! {
    /// A reply's status FINISH and CONTINUE swapped.
    WrongStatus = "wrong_status" in [Prefiller];
    /// A reply's `ok_reqs` left out.
    MissingField = "missing_field" in [Prefiller];
    /// An unknown key appended to the message's map.
    ExtraField = "extra_field" in [Prefiller, Decoder];
    /// An empty frame after the payload.
    ExtraFrame = "extra_frame" in [Prefiller, Decoder];
    /// The first request id of a reply's `ok_reqs` or a pull's `req_blocks` renamed.
    WrongId = "wrong_id" in [Prefiller, Decoder];
    /// The last byte of the payload flipped.
    FlipByte = "flip_byte" in [Prefiller, Decoder];
    /// The map's first key written as a `str8` instead of a fixstr: the same value, not msgspec's bytes.
    LongStrHeader = "long_str_header" in [Prefiller, Decoder];
    /// Terminal replies never sent.
    MissingResponse = "missing_response" in [Prefiller];
    /// Terminal replies sent twice.
    DuplicateCompletion = "duplicate_completion" in [Prefiller];
    /// CONTINUE and FINISH echo a layout id one more than the pull's.
    WrongLayoutEcho = "wrong_layout_echo" in [Prefiller];
    /// An ERROR reply's `err_msg` reworded.
    WrongErrMsg = "wrong_err_msg" in [Prefiller];
    /// Empty `ok_reqs` / `err_reqs` sent as `[]` instead of left out.
    EmptyIdLists = "empty_id_lists" in [Prefiller];
    /// The registration with the bootstrap server names a tensor-parallel rank one more than its own.
    WrongRegistration = "wrong_registration" in [Prefiller];
    /// `status` reports no freed transfer (`finished_sending` empty).
    UnreportedFree = "unreported_free" in [Prefiller];
    /// `status` reports every freed transfer twice.
    FreedTwice = "freed_twice" in [Prefiller];
    /// `status` reports one tracked transfer more than it has.
    LeakTransfer = "leak_transfer" in [Prefiller];
    /// `status` reports one open exchange more than it has.
    LeakExchange = "leak_exchange" in [Prefiller, Decoder];
    /// `status` reports its transfer-engine writes (a pull-family decoder: its reads) one byte longer.
    MisreportWrites = "misreport_writes" in [Prefiller, Decoder];
    /// A pull's `remote_port` (its transfer-engine session) one more than its own.
    WrongSession = "wrong_session" in [Decoder];
    /// A pull's first destination block id one more.
    WrongBlocks = "wrong_blocks" in [Decoder];
    /// Every pull sent twice on its connection.
    DuplicateRequest = "duplicate_request" in [Decoder];
    /// Lease heartbeats never sent (the exchange opened with no message).
    DropHeartbeats = "drop_heartbeats" in [Decoder];
    /// `status` reports failed requests without their invalid blocks.
    NoInvalidBlocks = "no_invalid_blocks" in [Decoder];
    /// `status` reports each failed request's invalid blocks without the last one.
    MissingInvalidBlock = "missing_invalid_block" in [Decoder];
    /// `status` reports no failed request.
    UnreportedFailure = "unreported_failure" in [Decoder];
    /// `status` reports failed requests in `failed_recving` instead of by their blocks.
    FailedRecvingInstead = "failed_recving_instead" in [Decoder];
    /// `status` reports no finished request.
    UnreportedFinish = "unreported_finish" in [Decoder];
    /// `status` reports every finished request twice.
    FinishedTwice = "finished_twice" in [Decoder];
    /// `status` reports one waiting pull more than it has.
    LeakPull = "leak_pull" in [Decoder];
    /// `read_memory` answers with the first nonzero byte flipped: a byte that landed wrong.
    CorruptMemory = "corrupt_memory" in [Decoder];
    /// The handshake answer advertises every buffer at 4 KiB (the regions are larger).
    TeBufferShort = "te_buffer_short" in [Decoder];
    /// The handshake answer leaves the last buffer out.
    TeBufferMissing = "te_buffer_missing" in [Decoder];
    /// The handshake answer gives a buffer length 0 (a corrupted descriptor).
    TeBufferCorrupt = "te_buffer_corrupt" in [Decoder];
    /// The handshake answer has no segment `name`.
    TeNameMissing = "te_name_missing" in [Decoder];
    /// The handshake answer's segment `name` is not the session.
    TeNameWrong = "te_name_wrong" in [Decoder];
    /// The handshake answer has no `rdma_server_name`.
    TeRdmaServerNameMissing = "te_rdma_server_name_missing" in [Decoder];
    /// The handshake answer has no `tcp_proto_version`.
    TeTcpProtoVersionMissing = "te_tcp_proto_version_missing" in [Decoder];
    /// The handshake answer says `tcp_proto_version` 3.
    TeTcpProtoVersion3 = "te_tcp_proto_version_3" in [Decoder];
    /// The handshake answer is a Connection frame (the initiator sent a Metadata one).
    TeAnswerType = "te_answer_type" in [Decoder];
    /// The handshake answer's body is not JSON.
    TeAnswerNotJson = "te_answer_not_json" in [Decoder];
    /// `POST /register` answers 201 where it would answer 200.
    RegisterWrongStatus = "register_wrong_status" in [Bootstrap];
    /// `POST /register` accepts every well-formed registration (200), conflicts included.
    RegisterAcceptsAll = "register_accepts_all" in [Bootstrap];
    /// `GET /query` leaves out one engine (the last key of its answer).
    QueryDropsEngine = "query_drops_engine" in [Bootstrap];
    /// `GET /query` adds an unknown key to its answer.
    QueryExtraKey = "query_extra_key" in [Bootstrap];
    /// The server's process exits (status 3) on its first `GET /query`.
    CrashOnQuery = "crash_on_query" in [Bootstrap];
    /// The process exits (status 3) when asked for its `status`.
    CrashOnStatus = "crash_on_status" in [Prefiller, Decoder];
    /// The process stops answering commands when asked for its `status`.
    HangOnStatus = "hang_on_status" in [Decoder];
}

impl Fault {
    /// The fault of a config name; errors on a name it does not know.
    pub fn parse(s: &str) -> Result<Fault, UnknownFault> {
        Fault::ALL.iter().copied().find(|f| f.name() == s).ok_or_else(|| UnknownFault(s.to_string()))
    }

    /// The faults of a config's `faults` list.
    pub fn parse_all(names: &[String]) -> Result<Vec<Fault>, UnknownFault> {
        names.iter().map(|n| Fault::parse(n)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_parse_back() {
        for f in Fault::ALL {
            assert_eq!(Fault::parse(f.name()).unwrap(), *f);
            assert!(!f.what().is_empty() && !f.roles().is_empty());
        }
        let mut names: Vec<_> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len());
        assert!(Fault::parse("no_such_fault").is_err());
    }
}
