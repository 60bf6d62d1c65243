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
use mooncake_wire::proto::Registry;
use serde_json::{json, Value as J};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::{bounded, Case, PlayError, PlayOptions};
use crate::checks::{check_exchanges, same_reply};
use crate::conversation::{Exchange, Payload, Sent};
use crate::finding::{CheckId, Finding};
use crate::reply::{reply_diff, show_reply};
use crate::scenarios::Ready;
use crate::setup::{check_landed, decoder_layout, expected_blocks_scaled, prefiller_config};
use crate::testee::Testee;
use crate::trace::{Event, Role as TraceRole, ZmqDir};
use mooncake_io::layout::LayoutExt;
use mooncake_testee_protocol::{Command, Done, PrefillerStatus, RoleConfig, Started};

struct LiveDecoder {
    session: String,
    recorded_session: String,
    memory: Arc<Mutex<mooncake_wire::proto::memory::Memory>>,
    server: tokio::task::JoinHandle<()>,
    /// The descriptors the prefillers' engines sent in their handshakes.
    peers: PeerLog,
}

/// The testee is started at `pairing.testee`; its replies are read at the trace's revision, as the recorded
/// decoder would read them.
pub async fn play(
    case: &Case,
    opts: &PlayOptions,
    pairing: &crate::crossver::Pairing,
) -> Result<Vec<Finding>, PlayError> {
    let t = &case.model;
    let profile = t.profile.clone().ok_or(PlayError::NoProfile)?;
    let sc = &opts.scenarios;
    let scenario = opts.scenario_for(t);
    let model = &sc.model;
    let abort = Duration::from_secs_f64(model.abort_timeout_s);
    let wait = abort + opts.slack;
    let mut out = vec![];

    // Bootstrap server (ours) and one testee per recorded prefiller worker, registered in recorded order.
    let spec = BootstrapSpec::new(t.revision.clone()).ok_or(PlayError::NoBootstrap)?.map_err(PlayError::runner)?;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await.map_err(PlayError::runner)?;
    let mut order: Vec<usize> = (0..t.prefillers.len()).collect();
    let reg_pos = |p: &crate::conversation::PrefillerConn| {
        t.http
            .iter()
            .position(|(r, _)| r.body.as_ref() == p.register.as_ref() && p.register.is_some())
            .unwrap_or(usize::MAX)
    };
    order.sort_by_key(|&i| reg_pos(&t.prefillers[i]));
    let mut testees: Vec<(String, Testee)> = vec![];
    let mut endpoint_map: HashMap<String, String> = HashMap::new();
    let result = async {
        let external = match &opts.external {
            super::External::Prefillers(eps) => Some(eps.clone()),
            _ => None,
        };
        for (n, &i) in order.iter().enumerate() {
            let p = &t.prefillers[i];
            if let Some(eps) = &external {
                // Already running and not ours to prepare: only its endpoint is known.
                let ep = eps.get(n).ok_or(PlayError::TooFewPeers(t.prefillers.len()))?;
                endpoint_map.insert(p.endpoint.clone(), ep.clone());
                continue;
            }
            let (mut testee, _) = Testee::start_logged(&opts.testee, opts.testee_log.as_ref()).await?;
            let mut cfg = prefiller_config(t, p, model, &boot.url())?;
            cfg.kv_lease_duration_s = scenario.prefiller_kv_lease_s;
            let a: Started = testee
                .send(&Command::start(&pairing.testee.revision, &RoleConfig::Prefiller(cfg)))
                .await
                .map_err(PlayError::starting("prefiller", &p.conn))?;
            let live = a.endpoint.ok_or(PlayError::Unsaid { role: "prefiller", what: "endpoint" })?;
            endpoint_map.insert(p.endpoint.clone(), live.clone());
            // Its registration must be the recorded one, with its own address.
            if let Some(want) = &p.register {
                let got = boot
                    .log
                    .lock()
                    .expect("log")
                    .iter()
                    .rev()
                    .find(|x| {
                        x.path == "/register"
                            && x.request.as_ref().and_then(|b| b.get("addr")).and_then(J::as_str) == Some(live.as_str())
                    })
                    .map(|x| x.request.clone());
                let mut want = want.clone();
                want["addr"] = json!(live);
                match got {
                    Some(Some(g)) if g == want => {}
                    Some(g) => out.push(
                        Finding::new(
                            CheckId::RegisterBody,
                            format!(
                                "body {} differs from the recorded {want}",
                                g.map(|x| x.to_string()).unwrap_or_default()
                            ),
                        )
                        .about(format!("{} POST /register", p.conn)),
                    ),
                    None => out.push(
                        Finding::new(CheckId::RegisterBody, "the prefiller never registered its endpoint")
                            .about(format!("{} POST /register", p.conn)),
                    ),
                }
            }
            // The scenario's transfers.
            for tr in &scenario.transfers {
                testee
                    .send::<Done>(&Command::Allocate {
                        p_req_id: tr.p_req_id.to_string(),
                        transfer_id: tr.transfer_id.to_string(),
                    })
                    .await?;
                if tr.ready == Ready::Before {
                    testee
                        .send::<Done>(&Command::Ready {
                            p_req_id: tr.p_req_id.to_string(),
                            transfer_id: tr.transfer_id.to_string(),
                            blocks: tr.blocks.to_vec(),
                        })
                        .await?;
                }
            }
            if scenario.fail_transfers > 0 {
                testee
                    .send::<Done>(&Command::FailNextTransfer { count: scenario.fail_transfers as u64, ret: -1 })
                    .await?;
            }
            testees.push((p.conn.clone(), testee));
        }

        // Our decoders: memory at the recorded layout, a transfer-engine write server each.
        let mut decoders: HashMap<String, LiveDecoder> = HashMap::new();
        for d in &t.decoders {
            let Some(req) = &d.layout_request else { continue };
            let layout = decoder_layout(req, model);
            let memory = Arc::new(Mutex::new(layout.memory(false)));
            let listener = TcpListener::bind("127.0.0.1:0").await.map_err(PlayError::runner)?;
            let port = listener.local_addr().map_err(PlayError::runner)?.port();
            let peers = PeerLog::default();
            let server = tokio::spawn(serve_logged(listener, memory.clone(), peers.clone()));
            decoders.insert(
                d.conn.clone(),
                LiveDecoder {
                    session: format!("127.0.0.1:{port}"),
                    recorded_session: format!("{}:{}", req.remote_hostname, req.remote_port),
                    memory,
                    server,
                    peers,
                },
            );
        }

        // Replay the decoder side in recorded order.
        let ctx = zmq::Context::new();
        let (in_tx, mut in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(&ctx, in_tx).map_err(PlayError::runner)?;
        let mut buffered: BTreeMap<u64, Vec<Vec<Vec<u8>>>> = BTreeMap::new();
        let mut live: BTreeMap<usize, Exchange> = BTreeMap::new();
        let mut replies_seen = 0usize;
        let mut dead: Vec<usize> = vec![];
        let recorded_replies: HashMap<u64, (usize, usize)> = t
            .exchanges
            .iter()
            .flat_map(|x| x.replies.iter().enumerate().map(move |(j, r)| (r.seq.unwrap_or(0), (x.index, j))))
            .collect();
        let sends: HashMap<u64, usize> = t.exchanges.iter().map(|x| (x.send_seq(), x.index)).collect();
        // Lease heartbeats (0.34.0): replayed as recorded, each on a DEALER of its own, ids after the pulls'.
        let beat_sends: HashMap<u64, usize> = t.heartbeats.iter().filter_map(|h| Some((h.seq?, h.index))).collect();
        let beat_replies: HashMap<u64, usize> =
            t.heartbeats.iter().flat_map(|h| h.replies.iter().filter_map(move |r| Some((r.seq?, h.index)))).collect();
        let beat_id = |h: usize| (t.exchanges.len() + h) as u64;
        let clock = Timeline::new(t, &scenario);
        for ev in t.events() {
            let Event::Zmq(z) = ev else { continue };
            if z.side != TraceRole::Decoder {
                continue;
            }
            if z.dir == ZmqDir::Send {
                clock.wait(z).await;
            }
            if let Some(&h) = beat_sends.get(&z.seq) {
                let live_ep = endpoint_map
                    .get(&z.endpoint)
                    .cloned()
                    .ok_or_else(|| PlayError::NoLivePrefiller(z.endpoint.clone()))?;
                reactor.open_dealer(beat_id(h), &live_ep, t.heartbeats[h].payload.bytes.clone());
                continue;
            }
            if let Some(&h) = beat_replies.get(&z.seq) {
                let got = next_frames(&mut buffered, &mut in_rx, beat_id(h), wait).await;
                out.extend(compare_heartbeat_reply(t, &profile, h, got, z));
                continue;
            }
            match z.dir {
                ZmqDir::Send => {
                    let Some(&k) = sends.get(&z.seq) else { continue };
                    let x = &t.exchanges[k];
                    let live_ep = endpoint_map
                        .get(&x.endpoint)
                        .cloned()
                        .ok_or_else(|| PlayError::NoLivePrefiller(x.endpoint.clone()))?;
                    let mut m = match &x.request.decoded {
                        Some(Ok(m)) => m.clone(),
                        Some(Err(e)) => return Err(PlayError::RecordedRequest { index: k, why: e.to_string() }),
                        None => {
                            return Err(PlayError::RecordedRequest { index: k, why: "no profile to decode it".into() })
                        }
                    };
                    let dec = decoders.get(&x.decoder).ok_or_else(|| PlayError::NoDecoderLayout(x.decoder.clone()))?;
                    let (host, port) = dec.session.rsplit_once(':').expect("host:port");
                    m.remote_hostname = host.to_string();
                    m.remote_port = port.parse::<u64>().expect("port").into();
                    let payload = profile.encode_metadata(&m).map_err(PlayError::runner)?;
                    reactor.open_dealer(k as u64, &live_ep, payload.clone());
                    let sent = Sent {
                        index: k,
                        decoder: x.decoder.clone(),
                        endpoint: live_ep,
                        request: payload,
                        seq: x.seq,
                        line: x.line,
                    };
                    live.insert(k, Exchange::new(Some(&profile), sent));
                }
                ZmqDir::Recv => {
                    let Some(&(k, j)) = recorded_replies.get(&z.seq) else { continue };
                    if dead.contains(&k) {
                        continue;
                    }
                    let x = &t.exchanges[k];
                    // The next live reply on exchange k.
                    let frames = loop {
                        if let Some(q) = buffered.get_mut(&(k as u64)) {
                            if !q.is_empty() {
                                break Some(q.remove(0));
                            }
                        }
                        match tokio::time::timeout(wait, in_rx.recv()).await {
                            Ok(Some(Incoming::Dealer { id, frames })) => buffered.entry(id).or_default().push(frames),
                            Ok(Some(Incoming::DealerError { id, error })) => {
                                out.push(
                                    Finding::new(CheckId::ZmqConnect, error)
                                        .at(Some(z.seq), Some(z.line))
                                        .about(format!("exchange {}", id + 1)),
                                );
                            }
                            Ok(_) => {}
                            Err(_) => break None,
                        }
                    };
                    let want_reply = x.replies[j].payload.value();
                    let msg = format!("exchange {} reply {}", k + 1, j + 1);
                    let Some(frames) = frames else {
                        out.push(
                            Finding::new(
                                CheckId::ReplyMissing,
                                format!(
                                    "no reply within {} (recorded: {})",
                                    super::secs(wait),
                                    want_reply.map(show_reply).unwrap_or_default()
                                ),
                            )
                            .at(Some(z.seq), Some(z.line))
                            .about(msg),
                        );
                        dead.push(k);
                        continue;
                    };
                    replies_seen += 1;
                    if frames.len() != 1 {
                        out.push(
                            Finding::new(
                                CheckId::ZmqFrames,
                                format!(
                                    "{} frames at the DEALER; the prefiller must send [routing_id, payload]",
                                    frames.len()
                                ),
                            )
                            .at(Some(z.seq), Some(z.line))
                            .about(msg.clone()),
                        );
                    }
                    // The payload is the first frame; any other frame was already reported.
                    let bytes = frames.first().cloned().unwrap_or_default();
                    // Decoded once, as the live conversation's reply.
                    let decoded = match live.get_mut(&k) {
                        Some(lx) => lx
                            .push_reply(Some(&profile), bytes.clone(), Some(z.seq), Some(z.line))
                            .payload
                            .decoded
                            .clone(),
                        None => Payload::reply(Some(&profile), bytes.clone(), None).decoded,
                    };
                    match decoded.expect("decoded with the trace's profile") {
                        Err(e) => out.push(
                            Finding::new(
                                CheckId::ReplyDecode,
                                format!("{} (bytes {})", e.msgspec_message(), hex::encode(&bytes)),
                            )
                            .at(Some(z.seq), Some(z.line))
                            .about(msg),
                        ),
                        Ok(got) => {
                            if !pairing.canonical_for_testee("MooncakeXferResponse", &bytes) {
                                out.push(
                                    Finding::new(
                                        CheckId::WireCanonical,
                                        format!("{} is not msgspec's encoding of that value", hex::encode(&bytes)),
                                    )
                                    .at(Some(z.seq), Some(z.line))
                                    .about(msg.clone()),
                                );
                            }
                            let mut want = want_reply.cloned().ok_or(PlayError::RecordedReplyUndecodable)?;
                            // The LAYOUT_MISS message names the decoder's session: map recorded → live.
                            if let (Some(m), Some(dec)) = (&mut want.err_msg, decoders.get(&x.decoder)) {
                                *m = m.replace(&dec.recorded_session, &dec.session);
                            }
                            let (got, want) = (pairing.project_reply(&got), pairing.project_reply(&want));
                            if !same_reply(&got, &want) {
                                out.push(
                                    Finding::new(CheckId::ReplyDiff, reply_diff(&got, &want))
                                        .at(Some(z.seq), Some(z.line))
                                        .about(msg),
                                );
                            }
                        }
                    }
                    // Scenario actions keyed on the replies received so far.
                    for tr in &scenario.transfers {
                        if tr.ready == Ready::AfterReply(replies_seen) {
                            for (_, te) in testees.iter_mut() {
                                te.send::<Done>(&Command::Ready {
                                    p_req_id: tr.p_req_id.to_string(),
                                    transfer_id: tr.transfer_id.to_string(),
                                    blocks: tr.blocks.to_vec(),
                                })
                                .await?;
                            }
                        }
                    }
                    if scenario.forget_layouts_after_reply == Some(replies_seen) {
                        for (_, te) in testees.iter_mut() {
                            te.send::<Done>(&Command::ForgetLayouts).await?;
                        }
                    }
                }
            }
        }
        // Nothing more may arrive on any exchange.
        let grace = tokio::time::sleep(Duration::from_millis(200));
        tokio::pin!(grace);
        loop {
            tokio::select! {
                m = in_rx.recv() => if let Some(Incoming::Dealer { id, frames }) = m { buffered.entry(id).or_default().push(frames) } else if m.is_none() { break },
                _ = &mut grace => break,
            }
        }
        for (id, q) in &buffered {
            for frames in q {
                let r = frames.last().and_then(|b| t.decode_reply(b));
                out.push(
                    Finding::new(
                        CheckId::ReplyExtra,
                        format!(
                            "a reply after the recorded ones: {}",
                            r.map(|r| show_reply(&r))
                                .unwrap_or_else(|| hex::encode(frames.last().cloned().unwrap_or_default()))
                        ),
                    )
                    .about(format!("exchange {}", id + 1)),
                );
            }
        }
        drop(reactor);

        // Protocol checks on what really went over the wire.
        let xs: Vec<Exchange> = live.into_values().collect();
        out.extend(check_exchanges(&profile, &xs));

        // Transfer-engine writes: the same (session, descriptors, bytes) as recorded, as a multiset.
        let mut got_writes: Vec<(String, u64, u64)> = vec![];
        let mut finished: HashMap<String, Vec<String>> = HashMap::new();
        for (conn, te) in testees.iter_mut() {
            let s: PrefillerStatus = te.status().await?;
            finished.insert(conn.clone(), s.freed(false));
            for w in s.writes {
                let recorded = decoders
                    .values()
                    .find(|d| d.session == w.session)
                    .map(|d| d.recorded_session.clone())
                    .unwrap_or(w.session);
                got_writes.push((recorded, w.descriptors, w.bytes));
            }
        }
        let mut want_writes: Vec<(String, u64, u64)> =
            t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), c.n, c.bytes)).collect();
        got_writes.sort();
        want_writes.sort();
        // A testee whose revision plans copies differently takes other descriptors: where its bytes land is
        // checked below instead (with its own planning rules).
        let planned_alike = pairing.planning_differs().is_empty();
        if external.is_none()
            && planned_alike
            && super::applies(&t.trace.header, CheckId::TeCalls)
            && got_writes != want_writes
        {
            out.push(
                Finding::new(
                    CheckId::TeCalls,
                    format!("(session, descriptors, bytes) {got_writes:?} vs recorded {want_writes:?}"),
                )
                .about("transfer-engine writes"),
            );
        }

        // The bytes that landed in our memory, where the testee's planning puts them.
        let planner = pairing.testee_profile.as_ref().unwrap_or(&profile);
        for d in &t.decoders {
            let (Some(req), Some(dec)) = (&d.layout_request, decoders.get(&d.conn)) else { continue };
            let mut expected = vec![];
            for x in t.exchanges.iter().filter(|x| x.decoder == d.conn) {
                let Some(m) = x.request.value() else { continue };
                for r in &x.replies {
                    for ok in r.payload.value().and_then(|r| r.ok_reqs.clone()).unwrap_or_default() {
                        if let Some(e) = expected_blocks_scaled(
                            req,
                            m,
                            &ok,
                            &scenario,
                            planner.rules.plan.block_groups,
                            crate::setup::stride_scale(planner, req, model, t),
                        ) {
                            expected.extend(e.blocks);
                        }
                    }
                }
            }
            let p_tp = t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
            let same_tp = req.remote_tp_size.as_i64() == Some(p_tp);
            let cols = crate::setup::columns(req, model);
            if external.is_some() {
                // Not our prefiller: its memory holds whatever it holds. Compare with it through its engine.
                let problems = match landed_through_engine(dec, &cols, model.num_blocks, &expected, same_tp).await {
                    Ok(p) => p,
                    Err(why) => {
                        opts.sink.not_checked("landed bytes", format!("{} ({})", why, d.conn));
                        vec![]
                    }
                };
                for p in problems.into_iter().take(5) {
                    out.push(Finding::new(CheckId::Landed, p).about(format!("memory of {}", d.conn)));
                }
                continue;
            }
            let mem = dec.memory.lock().expect("memory");
            let problems = check_landed(req, model.num_blocks, &expected, same_tp, |r, b| {
                let bl = *cols.block_lens.get(r)?;
                let base = *cols.base.get(r)?;
                mem.read(base + b * bl, bl).map(|s| s.to_vec())
            });
            for p in problems.into_iter().take(5) {
                out.push(Finding::new(CheckId::Landed, p).about(format!("memory of {}", d.conn)));
            }
        }

        // No state left once every timeout has passed — except what the revision never frees by design.
        let kept = kept_forever(t, &profile, &scenario);
        for (conn, te) in testees.iter_mut() {
            let deadline = tokio::time::Instant::now() + abort + opts.slack;
            loop {
                let s: PrefillerStatus = te.status().await?;
                let (tr, ex) = (s.tracked_transfers, s.open_exchanges);
                if tr.is_some_and(|n| n <= kept) && ex == Some(0) {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    out.push(
                        Finding::new(
                            CheckId::PStateLeak,
                            format!("{tr:?} transfers and {ex:?} exchanges still tracked after the abort timeout"),
                        )
                        .about(conn.clone()),
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // Completions, once every timeout has passed (`freed_mismatch`).
        let outcome = if super::applies(&t.trace.header, CheckId::PFinishedSending) {
            t.trace.header.observed_outcome.get("finished_sending").and_then(J::as_object)
        } else {
            None
        };
        if let (None, Some(want)) = (&external, outcome) {
            for (conn, ids) in want {
                let want: Vec<String> = ids
                    .as_array()
                    .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                    .unwrap_or_default();
                let Some((_, te)) = testees.iter_mut().find(|(c, _)| c == conn) else { continue };
                let s: PrefillerStatus = te.status().await?;
                if let Some(detail) = super::freed_mismatch(&s, &want) {
                    out.push(Finding::new(CheckId::PFinishedSending, detail).about(conn.clone()));
                }
            }
        }
        let _ = &finished;
        for d in decoders.into_values() {
            d.server.abort();
        }
        Ok::<(), PlayError>(())
    };
    let r = bounded(Duration::from_secs(120) + abort * 4, "the case", result).await.and_then(|x| x);
    for (_, te) in testees {
        te.stop().await;
    }
    drop(boot);
    r.map(|_| out)
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
    t: &crate::conversation::Conversation,
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
    fn new(t: &crate::conversation::Conversation, scenario: &crate::scenarios::Scenario) -> Timeline {
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
    async fn wait(&self, z: &crate::trace::ZmqEvent) {
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
    t: &crate::conversation::Conversation,
    profile: &mooncake_wire::proto::WireProfile,
    h: usize,
    got: Option<Vec<Vec<u8>>>,
    z: &crate::trace::ZmqEvent,
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
    if let Some(p) = crate::checks::heartbeat_reply_problem(profile, Some(&r)) {
        return vec![Finding::new(CheckId::LeaseReply, p).at(Some(z.seq), Some(z.line)).about(msg)];
    }
    match want {
        Some(w) if !same_reply(&r, w) => {
            vec![Finding::new(CheckId::LeaseReply, reply_diff(&r, w)).at(Some(z.seq), Some(z.line)).about(msg)]
        }
        _ => vec![],
    }
}
