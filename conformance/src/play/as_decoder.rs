//! The runner plays the recorded decoder(s) against prefiller testee(s): it runs the bootstrap server,
//! starts one testee per recorded prefiller worker, makes the scenario's transfers ready, replays every
//! recorded pull (addresses and ports rewritten to the live ones) on a fresh DEALER, and compares each reply
//! with the recorded one. Then it checks the transfer-engine writes, the bytes that landed in its memory, the
//! prefiller's completions and that no state is left behind.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::engine::client::Request;
use mooncake_io::engine::{serve_logged, EngineClient, PeerLog};
use mooncake_io::http::BootstrapServer;
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::{Registry, WireProfile};
use serde_json::{json, Value as J};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::{bounded, fire, CaseCtx, PlayError, PrefillerControl, PrefillerSide, ReplyActions};
use crate::role::Role;
use crate::setup::{check_landed, decoder_layout, expected_blocks_scaled, prefiller_config};
use crate::testee::Testee;
use mooncake_io::layout::LayoutExt;
use mooncake_testee_protocol::{Command, PrefillerStatus, RoleConfig, Started};
use mooncake_trace::checks::{check_exchanges, same_reply};
use mooncake_trace::conversation::{Exchange, Payload, PrefillerConn, Sent};
use mooncake_trace::finding::{CheckId, Finding};
use mooncake_trace::reply::{reply_diff, show_reply};
use mooncake_trace::trace::{Event, ZmqDir, ZmqEvent};

/// One of the runner's decoders: its memory at the recorded layout, and the transfer-engine server the
/// prefillers write into (stopped when dropped).
struct LiveDecoder {
    session: String,
    recorded_session: String,
    memory: Arc<Mutex<mooncake_wire::proto::memory::Memory>>,
    server: tokio::task::JoinHandle<()>,
    /// The descriptors the prefillers' engines sent in their handshakes.
    peers: PeerLog,
}

impl Drop for LiveDecoder {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The runner's decoders by recorded conn.
type Decoders = HashMap<String, LiveDecoder>;

/// The testee is started at `ctx.pairing.testee`; its replies are read at the trace's revision, as the
/// recorded decoder would read them.
pub(crate) async fn play(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let spec = BootstrapSpec::new(ctx.t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await.map_err(PlayError::runner)?;
    let mut sides: Vec<(String, PrefillerSide)> = vec![];
    let limit = Duration::from_secs(120) + ctx.abort() * 4;
    let r = bounded(limit, "the case", play_case(ctx, &boot, &mut sides)).await.and_then(|x| x);
    for (_, side) in sides {
        side.stop().await;
    }
    drop(boot);
    r
}

async fn play_case(
    ctx: &mut CaseCtx<'_>,
    boot: &BootstrapServer,
    sides: &mut Vec<(String, PrefillerSide)>,
) -> Result<(), PlayError> {
    let profile = ctx.profile()?;
    let endpoints = start_prefillers(ctx, boot, sides).await?;
    let decoders = start_decoders(ctx).await?;
    let live = Replay::new(&profile, &endpoints, &decoders)?.run(ctx, sides).await?;
    // Protocol checks on what really went over the wire.
    ctx.found_all(check_exchanges(&profile, &live));
    check_writes(ctx, sides, &decoders).await?;
    check_landed_bytes(ctx, &profile, &decoders).await;
    check_state_left(ctx, &profile, sides).await?;
    check_completions(ctx, sides).await
}

/// One prefiller per recorded worker, registered in recorded order: a testee the runner starts and, once all
/// are up, prepares with the scenario's transfers, or (`replay --peer`) one already running. Returns the live endpoint of each
/// recorded one.
async fn start_prefillers(
    ctx: &mut CaseCtx<'_>,
    boot: &BootstrapServer,
    sides: &mut Vec<(String, PrefillerSide)>,
) -> Result<HashMap<String, String>, PlayError> {
    let mut endpoints = HashMap::new();
    for (n, p) in ctx.prefillers_in_register_order().into_iter().enumerate() {
        if let super::External::Prefillers(eps) = &ctx.opts.external {
            // Already running and not ours to prepare: only its endpoint is known.
            let ep = eps.get(n).ok_or(PlayError::TooFewPeers(ctx.t.prefillers.len()))?;
            endpoints.insert(p.endpoint.clone(), ep.clone());
            continue;
        }
        let (mut testee, _) = Testee::start_logged(&ctx.opts.testee, ctx.opts.testee_log.as_ref()).await?;
        let mut cfg = prefiller_config(ctx.t, p, ctx.model(), &boot.url())?;
        cfg.kv_lease_duration_s = ctx.scenario.prefiller_kv_lease_s;
        let a: Started = testee
            .send(&Command::start(&ctx.pairing.testee.revision, &RoleConfig::Prefiller(cfg)))
            .await
            .map_err(PlayError::starting("prefiller", &p.conn))?;
        let live = a.endpoint.ok_or(PlayError::Unsaid { role: "prefiller", what: "endpoint" })?;
        endpoints.insert(p.endpoint.clone(), live.clone());
        check_registration(ctx, boot, p, &live);
        sides.push((p.conn.clone(), PrefillerSide::Testee(testee)));
    }
    // The scenario starts once every worker is up, as in the recording: a testee that takes seconds to start
    // must not let the transfers of the workers started before it expire.
    for (_, side) in sides.iter_mut() {
        side.prepare(&ctx.scenario.transfers, ctx.scenario.fail_transfers).await?;
    }
    Ok(endpoints)
}

/// `REGISTER-BODY`: the prefiller registered the recorded body, with its own address.
fn check_registration(ctx: &mut CaseCtx<'_>, boot: &BootstrapServer, p: &PrefillerConn, live: &str) {
    let Some(want) = &p.register else { return };
    let got = boot
        .log
        .lock()
        .expect("log")
        .iter()
        .rev()
        .find(|x| {
            x.path == "/register" && x.request.as_ref().and_then(|b| b.get("addr")).and_then(J::as_str) == Some(live)
        })
        .map(|x| x.request.clone());
    let mut want = want.clone();
    want["addr"] = json!(live);
    let detail = match got {
        Some(Some(g)) if g == want => return,
        Some(g) => format!("body {} differs from the recorded {want}", g.map(|x| x.to_string()).unwrap_or_default()),
        None => "the prefiller never registered its endpoint".to_string(),
    };
    ctx.found(Finding::new(CheckId::RegisterBody, detail).about(format!("{} POST /register", p.conn)));
}

/// Our decoders: memory at the recorded layout, a transfer-engine write server each.
async fn start_decoders(ctx: &CaseCtx<'_>) -> Result<Decoders, PlayError> {
    let mut decoders = HashMap::new();
    for d in &ctx.t.decoders {
        let Some(req) = &d.layout_request else { continue };
        let layout = decoder_layout(req, ctx.model());
        let memory = Arc::new(Mutex::new(layout.memory(false)));
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(PlayError::runner)?;
        let port = listener.local_addr().map_err(PlayError::runner)?.port();
        let peers = PeerLog::default();
        let server = tokio::spawn(serve_logged(listener, memory.clone(), peers.clone()));
        let recorded_session = format!("{}:{}", req.remote_hostname, req.remote_port);
        let live = LiveDecoder { session: format!("127.0.0.1:{port}"), recorded_session, memory, server, peers };
        decoders.insert(d.conn.clone(), live);
    }
    Ok(decoders)
}

/// The decoder side replayed in recorded order: each recorded pull sent on a DEALER of its own to the live
/// prefiller, each recorded reply awaited and compared, lease heartbeats replayed as recorded (0.34.0).
struct Replay<'r> {
    profile: &'r WireProfile,
    endpoints: &'r HashMap<String, String>,
    decoders: &'r Decoders,
    reactor: Reactor,
    in_rx: mpsc::UnboundedReceiver<Incoming>,
    /// Frames that arrived on a DEALER before their recorded reply was due, by DEALER id.
    buffered: BTreeMap<u64, Vec<Vec<Vec<u8>>>>,
    /// The live conversation, by exchange index.
    live: BTreeMap<usize, Exchange>,
    replies_seen: usize,
    /// Exchanges whose reply never came: their later replies are not awaited.
    dead: Vec<usize>,
    _ctx: zmq::Context,
}

impl<'r> Replay<'r> {
    fn new(
        profile: &'r WireProfile,
        endpoints: &'r HashMap<String, String>,
        decoders: &'r Decoders,
    ) -> Result<Replay<'r>, PlayError> {
        let zctx = zmq::Context::new();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(&zctx, in_tx).map_err(PlayError::runner)?;
        Ok(Replay {
            profile,
            endpoints,
            decoders,
            reactor,
            in_rx,
            buffered: BTreeMap::new(),
            live: BTreeMap::new(),
            replies_seen: 0,
            dead: vec![],
            _ctx: zctx,
        })
    }

    /// Replays every decoder event of the trace, then reports what arrived beyond the recorded replies.
    /// Returns the live conversation.
    async fn run(
        mut self,
        ctx: &mut CaseCtx<'_>,
        sides: &mut [(String, PrefillerSide)],
    ) -> Result<Vec<Exchange>, PlayError> {
        let t = ctx.t;
        let recorded_replies: HashMap<u64, (usize, usize)> = t
            .exchanges
            .iter()
            .flat_map(|x| x.replies.iter().enumerate().map(move |(j, r)| (r.seq.unwrap_or(0), (x.index, j))))
            .collect();
        let sends: HashMap<u64, usize> = t.exchanges.iter().map(|x| (x.send_seq(), x.index)).collect();
        let beat_sends: HashMap<u64, usize> = t.heartbeats.iter().filter_map(|h| Some((h.seq?, h.index))).collect();
        let beat_replies: HashMap<u64, usize> =
            t.heartbeats.iter().flat_map(|h| h.replies.iter().filter_map(move |r| Some((r.seq?, h.index)))).collect();
        let transfers = ctx.scenario.transfers.clone();
        let mut actions = ReplyActions::new(&ctx.scenario, &transfers);
        let clock = Timeline::new(t, &ctx.scenario);
        for ev in t.events() {
            let Event::Zmq(z) = ev else { continue };
            if z.side != Role::Decoder {
                continue;
            }
            if z.dir == ZmqDir::Send {
                clock.wait(z).await;
            }
            if let Some(&h) = beat_sends.get(&z.seq) {
                self.send_heartbeat(ctx, h, z)?;
            } else if let Some(&h) = beat_replies.get(&z.seq) {
                let got = next_frames(&mut self.buffered, &mut self.in_rx, beat_id(t, h), ctx.wait()).await;
                ctx.found_all(compare_heartbeat_reply(t, self.profile, h, got, z));
            } else if let (ZmqDir::Send, Some(&k)) = (z.dir, sends.get(&z.seq)) {
                self.send_pull(ctx, k)?;
            } else if let (ZmqDir::Recv, Some(&(k, j))) = (z.dir, recorded_replies.get(&z.seq)) {
                if !self.dead.contains(&k) && self.receive_reply(ctx, z, k, j).await? {
                    // Scenario actions keyed on the replies received so far.
                    fire(&mut actions, self.replies_seen, sides).await?;
                }
            }
        }
        self.report_extra(ctx).await;
        Ok(self.live.into_values().collect())
    }

    /// Heartbeat `h`, replayed as recorded on a DEALER of its own (ids after the pulls').
    fn send_heartbeat(&mut self, ctx: &CaseCtx<'_>, h: usize, z: &ZmqEvent) -> Result<(), PlayError> {
        let live_ep = self.endpoints.get(&z.endpoint).ok_or_else(|| PlayError::NoLivePrefiller(z.endpoint.clone()))?;
        self.reactor.open_dealer(beat_id(ctx.t, h), live_ep, ctx.t.heartbeats[h].payload.bytes.clone());
        Ok(())
    }

    /// Exchange `k`'s recorded request, with our decoder's live address and port, sent to the live prefiller.
    fn send_pull(&mut self, ctx: &CaseCtx<'_>, k: usize) -> Result<(), PlayError> {
        let x = &ctx.t.exchanges[k];
        let live_ep =
            self.endpoints.get(&x.endpoint).cloned().ok_or_else(|| PlayError::NoLivePrefiller(x.endpoint.clone()))?;
        let mut m = match &x.request.decoded {
            Some(Ok(m)) => m.clone(),
            Some(Err(e)) => return Err(PlayError::RecordedRequest { index: k, why: e.to_string() }),
            None => return Err(PlayError::RecordedRequest { index: k, why: "no profile to decode it".into() }),
        };
        let dec = self.decoders.get(&x.decoder).ok_or_else(|| PlayError::NoDecoderLayout(x.decoder.clone()))?;
        let (host, port) = dec.session.rsplit_once(':').expect("host:port");
        m.remote_hostname = host.to_string();
        m.remote_port = port.parse::<u64>().expect("port").into();
        let payload = self.profile.encode_metadata(&m).map_err(PlayError::runner)?;
        self.reactor.open_dealer(k as u64, &live_ep, payload.clone());
        let sent = Sent {
            index: k,
            decoder: x.decoder.clone(),
            endpoint: live_ep,
            request: payload,
            seq: x.seq,
            line: x.line,
        };
        self.live.insert(k, Exchange::new(Some(self.profile), sent));
        Ok(())
    }

    /// The next live reply on exchange `k`, compared with its recorded reply `j`. False when none came (the
    /// exchange is dead from then on).
    async fn receive_reply(
        &mut self,
        ctx: &mut CaseCtx<'_>,
        z: &ZmqEvent,
        k: usize,
        j: usize,
    ) -> Result<bool, PlayError> {
        let frames = self.next_reply(ctx, z, k).await;
        let want_reply = ctx.t.exchanges[k].replies[j].payload.value();
        let msg = format!("exchange {} reply {}", k + 1, j + 1);
        let at = |f: Finding| f.at(Some(z.seq), Some(z.line)).about(msg.clone());
        let Some(frames) = frames else {
            let recorded = want_reply.map(show_reply).unwrap_or_default();
            let detail = format!("no reply within {} (recorded: {recorded})", super::secs(ctx.wait()));
            ctx.found(at(Finding::new(CheckId::ReplyMissing, detail)));
            self.dead.push(k);
            return Ok(false);
        };
        self.replies_seen += 1;
        if frames.len() != 1 {
            let detail =
                format!("{} frames at the DEALER; the prefiller must send [routing_id, payload]", frames.len());
            ctx.found(at(Finding::new(CheckId::ZmqFrames, detail)));
        }
        // The payload is the first frame; any other frame was already reported.
        let bytes = frames.first().cloned().unwrap_or_default();
        // Decoded once, as the live conversation's reply.
        let decoded = match self.live.get_mut(&k) {
            Some(lx) => {
                lx.push_reply(Some(self.profile), bytes.clone(), Some(z.seq), Some(z.line)).payload.decoded.clone()
            }
            None => Payload::reply(Some(self.profile), bytes.clone(), None).decoded,
        };
        let found = match decoded.expect("decoded with the trace's profile") {
            Err(e) => {
                vec![Finding::new(
                    CheckId::ReplyDecode,
                    format!("{} (bytes {})", e.msgspec_message(), hex::encode(&bytes)),
                )]
            }
            Ok(got) => self.compare_reply(ctx, k, &bytes, &got, want_reply)?,
        };
        ctx.found_all(found.into_iter().map(at));
        Ok(true)
    }

    /// Frames on exchange `k`'s DEALER, waiting at most the case's wait; DEALER errors meanwhile are reported.
    async fn next_reply(&mut self, ctx: &mut CaseCtx<'_>, z: &ZmqEvent, k: usize) -> Option<Vec<Vec<u8>>> {
        loop {
            if let Some(q) = self.buffered.get_mut(&(k as u64)).filter(|q| !q.is_empty()) {
                return Some(q.remove(0));
            }
            match tokio::time::timeout(ctx.wait(), self.in_rx.recv()).await {
                Ok(Some(Incoming::Dealer { id, frames })) => self.buffered.entry(id).or_default().push(frames),
                Ok(Some(Incoming::DealerError { id, error })) => ctx.found(
                    Finding::new(CheckId::ZmqConnect, error)
                        .at(Some(z.seq), Some(z.line))
                        .about(format!("exchange {}", id + 1)),
                ),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// `WIRE-CANONICAL` and `REPLY-DIFF` of a reply that decoded.
    fn compare_reply(
        &self,
        ctx: &CaseCtx<'_>,
        k: usize,
        bytes: &[u8],
        got: &mooncake_wire::typed::MooncakeXferResponse,
        want: Option<&mooncake_wire::typed::MooncakeXferResponse>,
    ) -> Result<Vec<Finding>, PlayError> {
        let mut out = vec![];
        if let Some(detail) = ctx.pairing.non_canonical_for_testee("MooncakeXferResponse", bytes) {
            out.push(Finding::new(CheckId::WireCanonical, detail));
        }
        let mut want = want.cloned().ok_or(PlayError::RecordedReplyUndecodable)?;
        // The LAYOUT_MISS message names the decoder's session: map recorded → live.
        if let (Some(m), Some(dec)) = (&mut want.err_msg, self.decoders.get(&ctx.t.exchanges[k].decoder)) {
            *m = m.replace(&dec.recorded_session, &dec.session);
        }
        let (got, want) = (ctx.pairing.project_reply(got), ctx.pairing.project_reply(&want));
        if !same_reply(&got, &want) {
            out.push(Finding::new(CheckId::ReplyDiff, reply_diff(&got, &want)));
        }
        Ok(out)
    }

    /// `REPLY-EXTRA`: nothing more may arrive on any exchange.
    async fn report_extra(&mut self, ctx: &mut CaseCtx<'_>) {
        let grace = tokio::time::sleep(Duration::from_millis(200));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                m = self.in_rx.recv() => match m {
                    Some(Incoming::Dealer { id, frames }) => self.buffered.entry(id).or_default().push(frames),
                    Some(_) => {}
                    None => break,
                },
                _ = &mut grace => break,
            }
        }
        for (id, q) in &self.buffered {
            for frames in q {
                let last = frames.last().cloned().unwrap_or_default();
                let shown = ctx.t.decode_reply(&last).map(|r| show_reply(&r)).unwrap_or_else(|| hex::encode(&last));
                let detail = format!("a reply after the recorded ones: {shown}");
                ctx.found(Finding::new(CheckId::ReplyExtra, detail).about(format!("exchange {}", id + 1)));
            }
        }
    }
}

/// The runner's DEALER id of heartbeat `h`: after the pulls'.
fn beat_id(t: &mooncake_trace::conversation::Conversation, h: usize) -> u64 {
    (t.exchanges.len() + h) as u64
}

/// `TE-CALLS`: the transfer-engine writes are the recorded (session, descriptors, bytes), as a multiset. A
/// testee whose revision plans copies differently takes other descriptors: where its bytes land is checked
/// instead (with its own planning rules).
async fn check_writes(
    ctx: &mut CaseCtx<'_>,
    sides: &mut [(String, PrefillerSide)],
    decoders: &Decoders,
) -> Result<(), PlayError> {
    let ours = !matches!(ctx.opts.external, super::External::Prefillers(_));
    if !ours || !ctx.pairing.planning_differs().is_empty() {
        return Ok(());
    }
    let recorded = |live: &str| decoders.values().find(|d| d.session == live).map(|d| d.recorded_session.clone());
    super::check_te_calls(ctx, sides, recorded).await
}

/// `LANDED`: the bytes in our decoders' memory are where the testee's planning puts them. For a prefiller the
/// runner does not control, they are compared with its memory through its own engine.
async fn check_landed_bytes(ctx: &mut CaseCtx<'_>, profile: &WireProfile, decoders: &Decoders) {
    let t = ctx.t;
    let model = ctx.model();
    let planner = ctx.pairing.testee_profile.as_ref().unwrap_or(profile);
    let external = matches!(ctx.opts.external, super::External::Prefillers(_));
    for d in &t.decoders {
        let (Some(req), Some(dec)) = (&d.layout_request, decoders.get(&d.conn)) else { continue };
        let expected = expected_landing(ctx, planner, req, &d.conn);
        let p_tp = t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
        let same_tp = req.remote_tp_size.as_i64() == Some(p_tp);
        let cols = crate::setup::columns(req, model);
        let problems = if external {
            match landed_through_engine(dec, &cols, model.num_blocks, &expected, same_tp).await {
                Ok(p) => p,
                Err(why) => {
                    ctx.sink.not_checked("landed bytes", format!("{} ({})", why, d.conn));
                    vec![]
                }
            }
        } else {
            let mem = dec.memory.lock().expect("memory");
            check_landed(req, model.num_blocks, &expected, same_tp, |r, b| {
                let bl = *cols.block_lens.get(r)?;
                let base = *cols.base.get(r)?;
                mem.read(base + b * bl, bl).map(|s| s.to_vec())
            })
        };
        for p in problems.into_iter().take(5) {
            ctx.found(Finding::new(CheckId::Landed, p).about(format!("memory of {}", d.conn)));
        }
    }
}

/// The (region, block, source block) writes decoder `conn` should hold: the blocks of every request the
/// recorded replies say succeeded, planned with `planner`'s rules.
fn expected_landing(
    ctx: &CaseCtx<'_>,
    planner: &WireProfile,
    req: &mooncake_wire::typed::MooncakeXferMetadata,
    conn: &str,
) -> Vec<(usize, u64, u64)> {
    let (t, model) = (ctx.t, ctx.model());
    let scale = crate::setup::stride_scale(planner, req, model, t);
    let mut expected = vec![];
    for x in t.exchanges.iter().filter(|x| x.decoder == conn) {
        let Some(m) = x.request.value() else { continue };
        for r in &x.replies {
            for ok in r.payload.value().and_then(|r| r.ok_reqs.clone()).unwrap_or_default() {
                let groups = planner.rules.plan.block_groups;
                if let Some(e) = expected_blocks_scaled(req, m, &ok, &ctx.scenario, groups, scale) {
                    expected.extend(e.blocks);
                }
            }
        }
    }
    expected
}

/// `P-STATE-LEAK`: no state left once every timeout has passed — except what the revision never frees by
/// design.
async fn check_state_left(
    ctx: &mut CaseCtx<'_>,
    profile: &WireProfile,
    sides: &mut [(String, PrefillerSide)],
) -> Result<(), PlayError> {
    let kept = kept_forever(ctx.t, profile, &ctx.scenario);
    for (conn, side) in sides.iter_mut() {
        let Some(te) = side.testee() else { continue };
        let deadline = tokio::time::Instant::now() + ctx.wait();
        loop {
            let s: PrefillerStatus = te.status().await?;
            let (tr, ex) = (s.tracked_transfers, s.open_exchanges);
            if tr.is_some_and(|n| n <= kept) && ex == Some(0) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                let detail = format!("{tr:?} transfers and {ex:?} exchanges still tracked after the abort timeout");
                ctx.found(Finding::new(CheckId::PStateLeak, detail).about(conn.clone()));
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// `P-FINISHED-SENDING`: the completions, once every timeout has passed (`freed_mismatch`).
async fn check_completions(ctx: &mut CaseCtx<'_>, sides: &mut [(String, PrefillerSide)]) -> Result<(), PlayError> {
    let ours = !matches!(ctx.opts.external, super::External::Prefillers(_));
    if !ours || !ctx.applies(CheckId::PFinishedSending) {
        return Ok(());
    }
    let Some(want) = ctx.t.trace.header.observed_outcome.get("finished_sending").and_then(J::as_object) else {
        return Ok(());
    };
    for (conn, ids) in want {
        let want: Vec<String> =
            ids.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
        let Some(te) = sides.iter_mut().find(|(c, _)| c == conn).and_then(|(_, s)| s.testee()) else { continue };
        let s: PrefillerStatus = te.status().await?;
        if let Some(detail) = super::freed_mismatch(&s, &want) {
            ctx.found(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
        }
    }
    Ok(())
}

/// Why the landed bytes cannot be compared through the peer's own transfer engine (the report says "not
/// checked: landed bytes — why").
#[derive(Debug, thiserror::Error)]
enum Uncomparable {
    /// Handshakes reached the runner, but none named a segment it can use.
    #[error("the peer's engine is not reachable: its handshake named no usable segment ({0})")]
    NoUsableSegment(mooncake_io::engine::HandshakeError),
    /// No handshake reached the runner.
    #[error("the peer's engine is not reachable: no transfer-engine handshake reached the runner")]
    NoHandshake,
    /// Handshakes named several segments (the engines that wrote).
    #[error("several engines wrote into one decoder ({})", .0.join(", "))]
    SeveralEngines(Vec<String>),
    /// The tensor-parallel sizes differ.
    #[error("heterogeneous TP: blocks through the peer's engine are not compared")]
    HeterogeneousTp,
    /// The peer's segment cannot be described.
    #[error("the peer's engine is not reachable at {segment}: {source}")]
    Unreachable {
        /// The segment.
        segment: String,
        /// The cause.
        source: mooncake_io::engine::TransferError,
    },
    /// The peer registers another number of buffers than its layout has regions.
    #[error("the peer's engine registers {buffers} buffers, its layout has {regions} regions")]
    Buffers {
        /// Buffers registered.
        buffers: usize,
        /// Regions of the layout.
        regions: usize,
    },
    /// A source block lies outside the peer's buffer.
    #[error("source block {block} lies outside the peer's buffer {region}")]
    OutsideBuffer {
        /// The block.
        block: u64,
        /// The region (buffer index).
        region: usize,
    },
    /// Reading a source block failed.
    #[error("reading the peer's block {block} of region {region}: {source}")]
    Read {
        /// The block.
        block: u64,
        /// The region.
        region: usize,
        /// The cause.
        source: mooncake_io::engine::TransferError,
    },
}

/// Landed bytes of a prefiller the runner does not control, checked through that prefiller's own transfer
/// engine: the initiator's handshake named its segment; the runner handshakes with it and reads each source
/// block from its registered buffers (one buffer per region of the layout, in registration order) to compare
/// with what landed. `Err(why)` when that cannot be done (the report says "not checked: landed bytes — why").
async fn landed_through_engine(
    dec: &LiveDecoder,
    cols: &crate::setup::Columns,
    num_blocks: u64,
    expected: &[(usize, u64, u64)],
    same_tp: bool,
) -> Result<Vec<String>, Uncomparable> {
    let log: Vec<_> = dec.peers.lock().expect("peer log").clone();
    let mut names: Vec<String> = vec![];
    let mut unusable = None;
    for e in &log {
        match e {
            Ok(d) if !names.contains(&d.name) => names.push(d.name.clone()),
            Ok(_) => {}
            Err(why) => unusable = Some(why.clone()),
        }
    }
    let name = match names.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(match unusable {
                Some(why) => Uncomparable::NoUsableSegment(why),
                None => Uncomparable::NoHandshake,
            })
        }
        many => return Err(Uncomparable::SeveralEngines(many.to_vec())),
    };
    if !same_tp {
        return Err(Uncomparable::HeterogeneousTp);
    }
    let client = EngineClient::new();
    let seg =
        client.segment(&name).await.map_err(|source| Uncomparable::Unreachable { segment: name.clone(), source })?;
    if seg.buffers.len() != cols.base.len() {
        return Err(Uncomparable::Buffers { buffers: seg.buffers.len(), regions: cols.base.len() });
    }
    let mut last: HashMap<(usize, u64), u64> = HashMap::new();
    for (r, b, src) in expected {
        last.insert((*r, *b), *src);
    }
    let mut problems = vec![];
    for r in 0..cols.base.len() {
        let bl = cols.block_lens[r];
        let buf = &seg.buffers[r];
        for b in 0..num_blocks {
            let ours = dec.memory.lock().expect("memory").read(cols.base[r] + b * bl, bl).map(|s| s.to_vec());
            let Some(ours) = ours else {
                problems.push(format!("region {r} block {b}: cannot read the decoder's memory"));
                continue;
            };
            match last.get(&(r, b)) {
                None if ours.iter().any(|x| *x != 0) => {
                    problems.push(format!("region {r} block {b}: written, but no successful request targets it"))
                }
                None => {}
                Some(src) => {
                    let at = buf.addr + src * bl;
                    if src * bl + bl > buf.length {
                        return Err(Uncomparable::OutsideBuffer { block: *src, region: r });
                    }
                    let theirs = client
                        .transfer(&name, vec![Request::Read { addr: at, len: bl }])
                        .await
                        .map_err(|source| Uncomparable::Read { block: *src, region: r, source })?;
                    if let Some(k) = (0..ours.len()).find(|&k| ours[k] != theirs[0][k]) {
                        problems.push(format!(
                            "region {r} block {b} byte {k}: {:#04x}, the peer's source block {src} holds {:#04x}",
                            ours[k], theirs[0][k]
                        ));
                    }
                }
            }
        }
    }
    Ok(problems)
}

/// Transfers a prefiller of this revision keeps forever in this trace: where heterogeneous TP is refused once a
/// request becomes ready, the refused round's requests stay marked as being sent and never expire.
fn kept_forever(
    t: &mooncake_trace::conversation::Conversation,
    profile: &mooncake_wire::proto::WireProfile,
    scenario: &crate::scenarios::Scenario,
) -> u64 {
    use mooncake_wire::spec::behaviour::HeterogeneousTp;
    let p_tp = t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
    let tp_differs =
        t.decoders.iter().filter_map(|d| d.layout_request.as_ref()).any(|m| m.remote_tp_size.as_i64() != Some(p_tp));
    if profile.rules.heterogeneous_tp == HeterogeneousTp::RefusedWhenReady && tp_differs {
        scenario.transfers.len() as u64
    } else {
        0
    }
}

/// When the runner sends each recorded decoder message, so that delays the scenario depends on (the pull after
/// `pull_delay_s`, lease heartbeats in their cadence) are reproduced: the first pull `pull_delay_s` after the
/// transfers were made ready, every other send at its recorded distance from that pull (`t` of the trace's
/// events; as fast as possible where the trace has no times). Scenarios without a delay or heartbeats are
/// replayed as fast as possible, as before.
struct Timeline {
    start: tokio::time::Instant,
    /// The live instant of the first pull and its recorded `t`.
    anchor: Option<(tokio::time::Instant, Option<f64>)>,
}

impl Timeline {
    fn new(t: &mooncake_trace::conversation::Conversation, scenario: &crate::scenarios::Scenario) -> Timeline {
        let start = tokio::time::Instant::now();
        let timed = scenario.pull_delay_s > 0.0 || !t.heartbeats.is_empty();
        let first_pull_t = t.exchanges.first().and_then(|x| x.seq).and_then(|s| {
            t.events().iter().find_map(|e| match e {
                Event::Zmq(z) if z.seq == s => z.t,
                _ => None,
            })
        });
        let delay = Duration::from_secs_f64(scenario.pull_delay_s.max(0.0));
        let anchor = timed.then(|| (start + delay, first_pull_t));
        Timeline { start, anchor }
    }

    /// Waits until event `z` is due.
    async fn wait(&self, z: &mooncake_trace::trace::ZmqEvent) {
        let Some((at, first)) = self.anchor else { return };
        let due = match (first, z.t) {
            (Some(f), Some(t)) if t >= f => at + Duration::from_secs_f64(t - f),
            (Some(f), Some(t)) => at.checked_sub(Duration::from_secs_f64(f - t)).unwrap_or(self.start),
            // No times: only the first pull waits for the delay.
            _ if z.t.is_none() && self.start <= at => at,
            _ => return,
        };
        tokio::time::sleep_until(due).await;
    }
}

/// The next frames that arrive on the runner's DEALER `id` within `wait` (others are kept for their exchange).
async fn next_frames(
    buffered: &mut BTreeMap<u64, Vec<Vec<Vec<u8>>>>,
    in_rx: &mut mpsc::UnboundedReceiver<Incoming>,
    id: u64,
    wait: Duration,
) -> Option<Vec<Vec<u8>>> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        if let Some(q) = buffered.get_mut(&id).filter(|q| !q.is_empty()) {
            return Some(q.remove(0));
        }
        match tokio::time::timeout_at(until, in_rx.recv()).await {
            Ok(Some(Incoming::Dealer { id: got, frames })) => buffered.entry(got).or_default().push(frames),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return None,
        }
    }
}

/// `LEASE-REPLY` on a live heartbeat's reply: one frame, the revision's reply (`checks::heartbeat_reply_problem`),
/// and the recorded one (status and text).
fn compare_heartbeat_reply(
    t: &mooncake_trace::conversation::Conversation,
    profile: &mooncake_wire::proto::WireProfile,
    h: usize,
    got: Option<Vec<Vec<u8>>>,
    z: &mooncake_trace::trace::ZmqEvent,
) -> Vec<Finding> {
    let msg = format!("heartbeat {}", h + 1);
    let want = t.heartbeats[h].replies.first().and_then(|r| r.payload.value());
    let Some(frames) = got else {
        return vec![Finding::new(CheckId::LeaseReply, "no reply; a prefiller answers a heartbeat at once")
            .at(Some(z.seq), Some(z.line))
            .about(msg)];
    };
    let bytes = frames.last().cloned().unwrap_or_default();
    let r = match profile.decode_response(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return vec![Finding::new(CheckId::ReplyDecode, e.msgspec_message())
                .at(Some(z.seq), Some(z.line))
                .about(msg)]
        }
    };
    if let Some(p) = mooncake_trace::checks::heartbeat_reply_problem(profile, Some(&r)) {
        return vec![Finding::new(CheckId::LeaseReply, p).at(Some(z.seq), Some(z.line)).about(msg)];
    }
    match want {
        Some(w) if !same_reply(&r, w) => {
            vec![Finding::new(CheckId::LeaseReply, reply_diff(&r, w)).at(Some(z.seq), Some(z.line)).about(msg)]
        }
        _ => vec![],
    }
}
