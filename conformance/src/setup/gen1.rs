//! What a generation-1 case reads off its trace and scenario before anything starts: the recorded messages,
//! the transfers by request, each worker's layout and TP rank (shared by the player, its dry run and the
//! matrix).

use std::collections::BTreeMap;
use std::time::Duration;

use mooncake_testee_protocol::LayoutConfig;
use mooncake_wire::proto::gen1::{unsigned_int, AgentMetadata, Gen1Profile};

use super::{Columns, SetupError};
use crate::role::Role;
use crate::scenarios::{Model, Scenario};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::ZmqDir;

/// How far apart the synthetic regions of two TP ranks of one side start.
const RANK_SPAN: u64 = 0x10_0000_0000;

/// No base had `n` free consecutive ports: the last base's failure.
#[derive(Debug, thiserror::Error)]
#[error("no free run of {n} consecutive ports on 127.0.0.1: {last}")]
pub struct NoConsecutivePorts<E> {
    /// How many workers were to start.
    pub n: u64,
    /// Why a worker of the last base tried did not start.
    pub last: E,
}

/// How many bases [`at_consecutive_ports`] tries.
const BASES: u64 = 32;

/// Starts `n` workers at consecutive ports on 127.0.0.1 (a generation-1 decoder finds worker `r` at the base
/// port plus `r`), trying up to 32 bases: `start(r, endpoint)` starts worker `r` bound at `endpoint`. The
/// workers of a base that did not work out are dropped (which stops them). Returns the base and the workers;
/// the error is the caller's `R`, made from [`NoConsecutivePorts`].
pub(crate) async fn at_consecutive_ports<W, E, R, F, Fut>(n: u64, mut start: F) -> Result<(u64, Vec<W>), R>
where
    F: FnMut(u64, String) -> Fut,
    Fut: std::future::Future<Output = Result<W, E>>,
    R: From<NoConsecutivePorts<E>>,
{
    let mut attempt = 0u64;
    loop {
        let base = 20_000 + (std::process::id() as u64 * 7919 + attempt * 104_729) % 40_000;
        let mut workers = vec![];
        let mut failed = None;
        for r in 0..n {
            match start(r, format!("tcp://127.0.0.1:{}", base + r)).await {
                Ok(w) => workers.push(w),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match failed {
            None => return Ok((base, workers)),
            Some(last) if attempt + 1 >= BASES => return Err(NoConsecutivePorts { n, last }.into()),
            Some(_) => attempt += 1,
        }
    }
}

/// One recorded message of a decoder worker and its reply.
pub(crate) struct Msg {
    pub(crate) decoder: String,
    pub(crate) endpoint: String,
    pub(crate) meta: AgentMetadata,
    pub(crate) reply: Option<Vec<u8>>,
    pub(crate) seq: u64,
    pub(crate) line: usize,
}

pub(crate) fn messages(t: &Conversation, profile: &Gen1Profile) -> Result<Vec<Msg>, SetupError> {
    let mut out: Vec<Msg> = vec![];
    for z in t.trace.zmq().filter(|z| z.side == Role::Decoder) {
        match z.dir {
            ZmqDir::Send => {
                let bytes = z.frames.last().cloned().unwrap_or_default();
                let meta = profile
                    .decode_request(&bytes)
                    .map_err(|source| SetupError::Undecodable { line: z.line, source })?;
                out.push(Msg {
                    decoder: z.conn.clone(),
                    endpoint: z.endpoint.clone(),
                    meta,
                    reply: None,
                    seq: z.seq,
                    line: z.line,
                });
            }
            ZmqDir::Recv => {
                if let Some(m) =
                    out.iter_mut().rev().find(|m| m.decoder == z.conn && m.endpoint == z.endpoint && m.reply.is_none())
                {
                    m.reply = Some(z.frames.last().cloned().unwrap_or_default());
                }
            }
        }
    }
    Ok(out)
}

/// The scenario's transfer (blocks, readiness) behind each recorded request id: the transfer named by that id
/// (how a setup derived from the trace names them), else through the scenario's `pulls` when the recording
/// used its ids, else by position.
pub(crate) fn transfers_by_id(scenario: &Scenario, msgs: &[Msg]) -> BTreeMap<String, crate::scenarios::Transfer> {
    let mut ids: Vec<String> = vec![];
    for m in msgs {
        for d in &m.meta.request_ids {
            if !ids.contains(d) {
                ids.push(d.clone());
            }
        }
    }
    let pulls: Vec<&crate::scenarios::Pull> = scenario.pulls.iter().flatten().collect();
    let mut out = BTreeMap::new();
    for (i, d) in ids.iter().enumerate() {
        if let Some(tr) = scenario.transfers.iter().find(|t| &t.transfer_id == d) {
            out.insert(d.clone(), tr.clone());
            continue;
        }
        let tid = pulls.iter().find(|p| &p.d_req_id == d).or_else(|| pulls.get(i)).map(|p| p.transfer_id.clone());
        if let Some(tr) = tid.and_then(|tid| scenario.transfers.iter().find(|t| t.transfer_id == tid)) {
            out.insert(d.clone(), tr.clone());
        }
    }
    out
}

/// A worker's layout as this generation registers it: as many regions as the decoder's request names, each
/// of the model's bytes per block for `tp_size`, at synthetic addresses from `base` (`P_BASE` or `D_BASE`),
/// each TP rank's regions [`RANK_SPAN`] apart.
pub(crate) fn layout(regions: usize, model: &Model, tp_size: u64, base: u64, rank: u64) -> LayoutConfig {
    let bytes = model.block_bytes(tp_size);
    let span = (bytes * model.num_blocks).next_power_of_two();
    let base = base + rank * RANK_SPAN;
    LayoutConfig {
        kv_caches_base_addr: (0..regions as u64).map(|r| base + r * span).collect(),
        block_lens: vec![bytes; regions],
        kv_block_lens: vec![bytes; regions],
        registered_layer_names: (0..regions).map(|r| format!("region.{r}")).collect(),
        registered_layer_indices: (0..regions as i64).collect(),
        registered_group_indices: vec![],
        registered_shared_group_ids: vec![],
        registered_row_offsets: vec![],
        num_blocks: model.num_blocks,
    }
}

pub(crate) fn columns_of(l: &LayoutConfig) -> Columns {
    Columns {
        base: l.kv_caches_base_addr.clone(),
        block_lens: l.block_lens.clone(),
        kv_block_lens: l.kv_block_lens.clone(),
        names: l.registered_layer_names.clone(),
        indices: l.registered_layer_indices.clone(),
        groups: vec![],
        shared: vec![],
        rows: vec![],
    }
}

/// TP rank of each recorded prefiller worker: its port's offset from the lowest port (base + dp·tp + rank).
pub(crate) fn ranks(t: &Conversation) -> Vec<(String, String, u64)> {
    let port = |ep: &str| ep.rsplit(':').next().and_then(|p| p.parse::<u64>().ok()).unwrap_or(0);
    let low = t.prefillers.iter().map(|p| port(&p.endpoint)).min().unwrap_or(0);
    let mut v: Vec<(String, String, u64)> =
        t.prefillers.iter().map(|p| (p.conn.clone(), p.endpoint.clone(), port(&p.endpoint) - low)).collect();
    v.sort_by_key(|x| x.2);
    v
}

/// What landed for a done message: (region, decoder block, prefiller block), one decoder block per
/// prefiller block's worth of bytes (`scale` decoder blocks when the prefiller's blocks are larger).
pub(crate) fn expected(
    m: &Msg,
    by_id: &BTreeMap<String, crate::scenarios::Transfer>,
    regions: usize,
    scale: u64,
) -> Vec<(usize, u64, u64)> {
    let mut out = vec![];
    for (d, dst) in m.meta.request_ids.iter().zip(&m.meta.block_ids) {
        let Some(tr) = by_id.get(d) else { continue };
        let src: Vec<u64> = tr.blocks.iter().flatten().copied().collect();
        let src = &src[src.len().saturating_sub(dst.len())..];
        for r in 0..regions {
            for (db, pb) in dst.iter().zip(src) {
                for j in 0..scale {
                    out.push((r, unsigned_int(*db) * scale + j, *pb));
                }
            }
        }
    }
    out
}

/// What a generation-1 case, and its dry run, read off the trace and its setup before anything starts.
pub(crate) struct Gen1Setup {
    pub(crate) profile: Gen1Profile,
    pub(crate) abort: Duration,
    /// The recorded messages, in order.
    pub(crate) msgs: Vec<Msg>,
    pub(crate) by_id: BTreeMap<String, crate::scenarios::Transfer>,
    /// Regions per worker: as many as the recorded requests name.
    pub(crate) regions: usize,
    /// (conn, endpoint, TP rank) of each recorded prefiller worker ([`ranks`]).
    pub(crate) workers: Vec<(String, String, u64)>,
    pub(crate) p_tp: u64,
    pub(crate) d_conns: Vec<String>,
    pub(crate) d_tp: u64,
}

impl Gen1Setup {
    pub(crate) fn new(t: &Conversation, model: &Model, scenario: &Scenario) -> Result<Gen1Setup, SetupError> {
        let profile = Gen1Profile::new(t.revision.clone())?;
        let msgs = messages(t, &profile)?;
        let by_id = transfers_by_id(scenario, &msgs);
        let regions = msgs.first().map(|m| m.meta.kv_caches_base_addr.len()).unwrap_or(0);
        let workers = ranks(t);
        let p_tp = workers.len().max(1) as u64;
        let d_conns: Vec<String> = t.decoders.iter().map(|d| d.conn.clone()).collect();
        let d_tp = d_conns.len().max(1) as u64;
        Ok(Gen1Setup {
            profile,
            abort: Duration::from_secs_f64(model.abort_timeout_s),
            msgs,
            by_id,
            regions,
            workers,
            p_tp,
            d_conns,
            d_tp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(f)
    }

    #[test]
    fn every_base_failing_gives_the_last_failure_after_all_bases() {
        let mut calls = 0u64;
        let r: Result<(u64, Vec<()>), NoConsecutivePorts<String>> = block_on(at_consecutive_ports(2, |r, ep| {
            calls += 1;
            let out = if r == 1 { Err(format!("{ep} in use (call {calls})")) } else { Ok(()) };
            async move { out }
        }));
        let e = r.expect_err("worker 1 never starts");
        // Two starts per base (worker 0 starts, worker 1 fails), every base tried.
        assert_eq!(calls, 2 * BASES);
        assert_eq!(e.n, 2);
        assert!(e.last.ends_with(&format!("(call {})", 2 * BASES)), "{}", e.last);
        let text = format!("no free run of 2 consecutive ports on 127.0.0.1: {}", e.last);
        assert_eq!(e.to_string(), text);
    }

    #[test]
    fn a_later_base_that_works_is_returned_with_its_workers() {
        let mut failures = 3;
        let r: Result<(u64, Vec<String>), NoConsecutivePorts<String>> = block_on(at_consecutive_ports(2, |_, ep| {
            let out = if failures > 0 {
                failures -= 1;
                Err("in use".to_string())
            } else {
                Ok(ep)
            };
            async move { out }
        }));
        let (base, workers) = r.expect("the fourth base works");
        assert_eq!(workers, [format!("tcp://127.0.0.1:{base}"), format!("tcp://127.0.0.1:{}", base + 1)]);
    }
}
