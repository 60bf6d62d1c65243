//! The runner plays the recorded pull prefiller worker; the testees are decoder workers.
//!
//! The runner's prefiller answers as the recording did: each metadata query with the recorded metadata — its
//! own engine's RPC port, its regions' addresses, `127.0.0.1` and its side-channel port put in, encoded with the
//! revision's codec — and each completion with the raw `ACK`; anything else gets no reply, as vllm-ascend's
//! prefiller does. Its engine serves reads from memory holding the provenance pattern.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::backend::serve_engine;
use mooncake_io::layout::LayoutExt;
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_testee_protocol::{Command, DecoderConfig, DecoderStatus, Done, LayoutConfig, Pull, RoleConfig, Started};
use mooncake_wire::codec::Codec;
use serde_json::Value as J;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::{provenance_block, runs, ACK};
use crate::play::{bounded, read_regions, CaseCtx, PlayError};
use crate::scenarios::PullRead;
use crate::setup::pull::{completion_of, PullSetup, METADATA};
use crate::setup::{D_BASE, P_BASE};
use crate::testee::Testee;
use mooncake_trace::finding::{CheckId, Finding};

/// The runner's prefiller: its ROUTER's messages as they arrived, its engine and ROUTER tasks (stopped when
/// dropped).
struct OwnPullPrefiller {
    port: u16,
    received: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _reactor: Arc<Reactor>,
}

impl Drop for OwnPullPrefiller {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

impl OwnPullPrefiller {
    async fn start(setup: &PullSetup) -> Result<OwnPullPrefiller, PlayError> {
        let layout = setup.layout(P_BASE);
        let memory = Arc::new(Mutex::new(layout.memory(true)));
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(PlayError::runner)?;
        let te_port = listener.local_addr().map_err(PlayError::runner)?.port();
        let engine = tokio::spawn(serve_engine(listener, memory));
        let (tx, rx) = mpsc::unbounded_channel();
        let reactor = Arc::new(Reactor::start(&zmq::Context::new(), tx).map_err(PlayError::runner)?);
        let bound = reactor.bind_router("tcp://127.0.0.1:*").await.map_err(PlayError::runner)?;
        let port: u16 =
            bound.rsplit(':').next().and_then(|p| p.parse().ok()).ok_or_else(|| PlayError::runner(bound.clone()))?;
        let metadata = live_metadata(setup, &layout, te_port, port)?;
        let received = Arc::new(Mutex::new(vec![]));
        let router = tokio::spawn(answer(reactor.clone(), rx, setup.codec.clone(), metadata, received.clone()));
        Ok(OwnPullPrefiller { port, received, tasks: vec![engine, router], _reactor: reactor })
    }
}

/// The recorded metadata with this prefiller's own engine port, region addresses, IP and side-channel port.
fn live_metadata(setup: &PullSetup, layout: &LayoutConfig, te_port: u16, port: u16) -> Result<Vec<u8>, PlayError> {
    let mut j = setup.metadata.clone();
    let mut bases = layout.kv_caches_base_addr.iter();
    replace_ints(&mut j["kv_caches_base_addr"], &mut || bases.next().copied().unwrap_or_default());
    j["te_rpc_port"] = J::from(te_port);
    j["local_ip"] = J::from("127.0.0.1");
    if j.get("handshake_port").is_some() {
        j["handshake_port"] = J::from(port);
    }
    let v = setup.codec.from_json(METADATA, &j).map_err(PlayError::runner)?;
    setup.codec.encode(METADATA, &v).map_err(PlayError::runner)
}

fn replace_ints(j: &mut J, next: &mut impl FnMut() -> u64) {
    match j {
        J::Array(a) => a.iter_mut().for_each(|x| replace_ints(x, next)),
        J::Number(_) => *j = J::from(next()),
        _ => {}
    }
}

/// The ROUTER's loop: a query gets the metadata, a completion `ACK`, anything else nothing.
async fn answer(
    reactor: Arc<Reactor>,
    mut rx: mpsc::UnboundedReceiver<Incoming>,
    codec: Arc<Codec>,
    metadata: Vec<u8>,
    received: Arc<Mutex<Vec<Vec<Vec<u8>>>>>,
) {
    while let Some(msg) = rx.recv().await {
        let Incoming::Router(frames) = msg else { continue };
        received.lock().expect("received").push(frames.clone());
        let (Some(id), Some(payload)) = (frames.first(), frames.last()) else { continue };
        let reply = if completion_of(&codec, payload).is_some() {
            ACK.to_vec()
        } else if codec.decode("GetMetaMsg", payload).is_ok() {
            metadata.clone()
        } else {
            continue;
        };
        reactor.router_send_batch(vec![vec![id.clone(), vec![], reply]]);
    }
}

/// A decoder testee per recorded decoder worker, with its layout.
type Decoders = Vec<(String, Testee, LayoutConfig)>;

/// The runner plays the prefiller worker; the testees are decoder workers.
pub(crate) async fn as_prefiller(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let setup = PullSetup::new(ctx.t, &ctx.opts.scenarios)?;
    let prefiller = OwnPullPrefiller::start(&setup).await?;
    let mut decoders: Decoders = vec![];
    let limit = Duration::from_secs(60) + setup.abort * 4;
    let r = bounded(limit, "the case", play_case(ctx, &setup, &prefiller, &mut decoders)).await.and_then(|x| x);
    for (_, te, _) in decoders {
        te.stop().await;
    }
    drop(prefiller);
    r
}

async fn play_case(
    ctx: &mut CaseCtx<'_>,
    setup: &PullSetup,
    prefiller: &OwnPullPrefiller,
    decoders: &mut Decoders,
) -> Result<(), PlayError> {
    start_decoders(ctx, setup, decoders).await?;
    for p in &setup.pulls {
        let Some((conn, te, _)) = decoders.get_mut(p.decoder as usize) else { continue };
        pull_one(ctx, setup, prefiller.port, conn, te, p).await?;
    }
    let received = prefiller.received.lock().expect("received").clone();
    compare_requests(ctx, setup, &received);
    for (conn, te, l) in decoders.iter_mut() {
        check_decoder(ctx, setup, conn, te, l).await?;
    }
    Ok(())
}

/// One decoder testee per recorded decoder worker (TP 1 each, as recorded).
async fn start_decoders(ctx: &CaseCtx<'_>, setup: &PullSetup, decoders: &mut Decoders) -> Result<(), PlayError> {
    for (i, conn) in setup.decoders.iter().enumerate() {
        let (mut te, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
        let l = setup.layout(D_BASE + i as u64 * 0x10_0000_0000);
        let mut cfg = DecoderConfig::new(l.clone());
        cfg.recv_timeout_s = Some((setup.abort * 2 + ctx.opts.slack).as_secs_f64());
        te.send::<Started>(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Decoder(cfg)))
            .await
            .map_err(PlayError::starting("decoder", conn))?;
        decoders.push((conn.clone(), te, l));
    }
    Ok(())
}

/// One request pulled by its decoder (its read made to fail first where the recorder did), waited for until
/// the decoder settled it (`D-SETTLE` when not in time).
async fn pull_one(
    ctx: &mut CaseCtx<'_>,
    setup: &PullSetup,
    port: u16,
    conn: &str,
    te: &mut Testee,
    p: &PullRead,
) -> Result<(), PlayError> {
    if p.fail_read {
        te.send::<Done>(&Command::FailNextTransfer { count: 1, ret: -1 }).await?;
    }
    let pull = Pull {
        d_req_id: p.request.clone(),
        transfer_id: p.request.clone(),
        blocks: vec![p.decoder_blocks.clone()],
        remote_blocks: vec![p.prefiller_blocks.clone()],
        engine_id: setup.engine_id.clone(),
        remote_host: Some("127.0.0.1".into()),
        remote_port: Some(port as u64),
        ..Default::default()
    };
    te.send::<Done>(&Command::Pull { requests: vec![pull] }).await?;
    let until = tokio::time::Instant::now() + setup.abort * 2 + ctx.opts.slack * 2;
    let settled = |s: &DecoderStatus| s.open_exchanges == Some(0) && s.finished.contains(&p.request);
    if !crate::play::settled(te, until, settled).await? {
        let f = Finding::new(CheckId::DSettle, format!("the decoder did not settle {} in time", p.request));
        ctx.found(f.about(conn.to_string()));
    }
    Ok(())
}

/// What the prefiller's ROUTER received, against what vllm-ascend's decoders sent, in order: `ZMQ-FRAMES`,
/// `REQUEST-COUNT`, `REQUEST-DIFF` (byte for byte: the messages carry no live value).
fn compare_requests(ctx: &mut CaseCtx<'_>, setup: &PullSetup, received: &[Vec<Vec<u8>>]) {
    if received.len() != setup.msgs.len() {
        let detail = format!("{} messages arrived, vllm-ascend's decoders sent {}", received.len(), setup.msgs.len());
        ctx.found(Finding::new(CheckId::RequestCount, detail).about("requests"));
    }
    for (k, (frames, m)) in received.iter().zip(&setup.msgs).enumerate() {
        let about = format!("message {} (recorded from {})", k + 1, m.conn);
        if frames.len() != 3 || !frames[1].is_empty() {
            let detail = format!("{} frames at the ROUTER; a REQ sends [routing_id, \"\", payload]", frames.len());
            ctx.found(Finding::new(CheckId::ZmqFrames, detail).about(about.clone()));
        }
        let got = frames.last().cloned().unwrap_or_default();
        if got != m.request {
            let detail = format!("{} vs recorded {}", hex::encode(&got), hex::encode(&m.request));
            ctx.found(Finding::new(CheckId::RequestDiff, detail).at(Some(m.seq), Some(m.line)).about(about));
        }
    }
}

/// A decoder testee's engine reads (`TE-CALLS`), outcomes (`D-OUTCOME`), state (`D-STATE-LEAK`) and the
/// blocks of the requests it read in its memory (`LANDED`), against vllm-ascend's decoder.
async fn check_decoder(
    ctx: &mut CaseCtx<'_>,
    setup: &PullSetup,
    conn: &str,
    te: &mut Testee,
    l: &LayoutConfig,
) -> Result<(), PlayError> {
    let s: DecoderStatus = te.status().await?;
    let mut found = check_reads(ctx, conn, &s);
    found.extend(check_outcome(ctx, conn, &s));
    if s.open_exchanges != Some(0) {
        let detail = format!("{} exchanges still open", crate::play::count(s.open_exchanges));
        found.push(Finding::new(CheckId::DStateLeak, detail));
    }
    let mine: Vec<&PullRead> =
        setup.pulls.iter().filter(|p| setup.decoders.get(p.decoder as usize).is_some_and(|c| c == conn)).collect();
    let read: Vec<&PullRead> = mine.into_iter().filter(|p| !p.fail_read && s.finished.contains(&p.request)).collect();
    found.extend(check_landed(setup, te, l, &read).await);
    ctx.found_all(found.into_iter().map(|f| f.about(conn.to_string())));
    Ok(())
}

/// `TE-CALLS`: the decoder's engine batches (descriptors, bytes, return code) against the recorded reads.
fn check_reads(ctx: &CaseCtx<'_>, conn: &str, s: &DecoderStatus) -> Vec<Finding> {
    let Some(reads) = &s.reads else {
        ctx.sink.not_checked("TE-CALLS", format!("{conn}'s status has no `reads`"));
        return vec![];
    };
    let got: Vec<(u64, u64, i64)> = reads.iter().map(|r| (r.descriptors, r.bytes, r.ret)).collect();
    let recorded = ctx.t.trace.header.transfer_engine_reads.as_ref().and_then(J::as_array).cloned().unwrap_or_default();
    let want: Vec<(u64, u64, i64)> = recorded
        .iter()
        .filter(|r| r["conn"] == conn)
        .map(|r| (r["n"].as_u64().unwrap_or(0), r["bytes"].as_u64().unwrap_or(0), r["ret"].as_i64().unwrap_or(0)))
        .collect();
    if got == want {
        return vec![];
    }
    let detail = format!("engine reads (descriptors, bytes, return code) {got:?} vs recorded {want:?}");
    vec![Finding::new(CheckId::TeCalls, detail)]
}

/// `D-OUTCOME`: the requests it reports received, and the blocks it reports not loaded (vLLM's
/// `get_block_ids_with_load_errors`), against the recording's.
fn check_outcome(ctx: &CaseCtx<'_>, conn: &str, s: &DecoderStatus) -> Vec<Finding> {
    if !ctx.applies(CheckId::DOutcome) {
        return vec![];
    }
    let o = &ctx.t.trace.header.observed_outcome;
    let strings = |j: &J| -> Vec<String> {
        j.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect()
    };
    let (mut want_fin, mut got_fin) = (strings(&o["finished_recving"][conn]), s.finished.clone());
    let mut want_err: Vec<u64> =
        o["load_errors"][conn].as_array().into_iter().flatten().filter_map(J::as_u64).collect();
    let mut got_err: Vec<u64> = s.failed.iter().flat_map(|f| f.invalid_blocks.clone()).collect();
    for v in [&mut want_fin, &mut got_fin] {
        v.sort();
    }
    for v in [&mut want_err, &mut got_err] {
        v.sort();
    }
    let mut out = vec![];
    if want_fin != got_fin {
        out.push(Finding::new(CheckId::DOutcome, format!("received {got_fin:?}, vllm-ascend's decoder {want_fin:?}")));
    }
    if want_err != got_err {
        let detail = format!("load errors (blocks) {got_err:?}, vllm-ascend's decoder {want_err:?}");
        out.push(Finding::new(CheckId::DOutcome, detail));
    }
    out
}

/// `LANDED`: each read request's destination blocks hold the prefiller's blocks they were paired with.
async fn check_landed(setup: &PullSetup, te: &mut Testee, l: &LayoutConfig, read: &[&PullRead]) -> Vec<Finding> {
    if read.is_empty() {
        return vec![];
    }
    let mem = read_regions(te, &l.kv_caches_base_addr, &l.block_lens, l.num_blocks).await;
    let bl = setup.block_len;
    let mut out = vec![];
    for p in read {
        for (r, p0, d0, n) in runs(p, setup.regions) {
            for i in 0..n {
                let got = mem
                    .get(r)
                    .and_then(|m| m.as_ref())
                    .and_then(|m| m.get(((d0 + i) * bl) as usize..((d0 + i + 1) * bl) as usize));
                if got != Some(&provenance_block(r, p0 + i, bl)[..]) && out.len() < 5 {
                    let detail = format!(
                        "{}: region {r} block {} does not hold the prefiller's block {}",
                        p.request,
                        d0 + i,
                        p0 + i
                    );
                    out.push(Finding::new(CheckId::Landed, detail));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake_trace::conversation::Conversation;
    use mooncake_trace::trace::Trace;

    /// The runner's metadata is the recorded one with its own engine port, addresses, IP and side-channel port:
    /// nothing else changes, and it is msgspec's encoding.
    #[test]
    fn live_metadata_changes_only_the_live_values() {
        for input in crate::bundled::Data::Embedded.traces("traces-pull").unwrap() {
            let c = Conversation::new(Trace::load_input(&input).unwrap()).unwrap();
            if c.revision.generation != 1 {
                continue;
            }
            let setup = PullSetup::new(&c, &crate::bundled::scenarios()).unwrap();
            let layout = setup.layout(P_BASE);
            let bytes = live_metadata(&setup, &layout, 4242, 5151).unwrap();
            let live = Codec::to_json(&setup.codec.decode(METADATA, &bytes).unwrap());
            assert!(mooncake_trace::canonical::mismatch(&setup.codec, METADATA, &bytes).is_none());
            assert_eq!(live["te_rpc_port"], 4242);
            assert_eq!(super::super::bases(&live), layout.kv_caches_base_addr);
            if live.get("handshake_port").is_some() {
                assert_eq!(live["handshake_port"], 5151);
            }
            let recorded = &setup.metadata;
            assert!(super::super::metadata_differences(&live, recorded).is_empty(), "{}", c.trace.path);
            assert_eq!(live["num_blocks"], recorded["num_blocks"]);
        }
    }
}
