//! Cases of generation-1 traces (vLLM 0.13.0 – 0.15.1): REQ → ROUTER at fixed ports, `MooncakeAgentMetadata`,
//! raw `trans_done` / `trans_error` replies, no bootstrap server.
//!
//! * `…/prefiller` (`as_decoder.rs`): the runner plays the recorded decoder worker(s) — a REQ per recorded
//!   message, to the live prefiller testee that stands for the recorded endpoint — and compares each raw reply,
//!   the transfer-engine writes, the landed bytes, what the prefiller freed and what it keeps.
//! * `…/decoder` (`as_prefiller.rs`): the runner plays the prefiller worker(s) with the spec's generation-1 core
//!   (`crate::counterpart`), bound at consecutive ports (a decoder finds worker `r` at base port + r), hands the
//!   decoder testee the recorded pulls, and compares the requests it sends and what it reports.
//!
//! Requests are known by one id on both sides in this generation: the prefiller's requests are readied under
//! the recorded request ids, with the scenario's blocks (`conformance/scenarios.toml`, matched through its
//! `pulls`, or by position when the recording used other ids).

mod as_decoder;
mod as_prefiller;

pub(crate) use as_decoder::as_decoder;
pub(crate) use as_prefiller::as_prefiller;

use crate::scenarios::Transfer;
use crate::setup::gen1::Gen1Setup;

/// The scenario's transfers under the ids a generation-1 prefiller knows them by: the recorded request ids,
/// on both sides.
fn transfers_by_request_id(setup: &Gen1Setup) -> Vec<Transfer> {
    setup
        .by_id
        .iter()
        .map(|(id, tr)| Transfer { p_req_id: id.clone(), transfer_id: id.clone(), ..tr.clone() })
        .collect()
}
