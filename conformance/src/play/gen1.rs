//! Cases of generation-1 traces (vLLM 0.13.0 – 0.15.1): REQ → ROUTER at fixed ports, `MooncakeAgentMetadata`,
//! raw `trans_done` / `trans_error` replies, no bootstrap server.
//!
//! * `…/prefiller`: the runner plays the recorded decoder worker(s) — a REQ per recorded message, to the live
//!   prefiller testee that stands for the recorded endpoint — and compares each raw reply, the
//!   transfer-engine writes, the landed bytes, what the prefiller freed and what it keeps.
//! * `…/decoder`: the runner plays the prefiller worker(s) with the spec's generation-1 core
//!   (`crate::counterpart`), bound at
//!   consecutive ports (a decoder finds worker `r` at base port + r), hands the decoder testee the recorded
//!   pulls, and compares the requests it sends and what it reports.
//!
//! Requests are known by one id on both sides in this generation: the prefiller's requests are readied under
//! the recorded request ids, with the scenario's blocks (`conformance/scenarios.toml`, matched through its
//! `pulls`, or by position when the recording used other ids).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_io::backend::serve_engine;
use mooncake_io::layout::{producer_with, LayoutExt};
use mooncake_io::reactor::{Incoming, Reactor};
use mooncake_testee_protocol::LayoutConfig;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::gen1::{unsigned_int, Gen1Prefiller, Gen1Profile};
use serde_json::Value as J;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::counterpart::{OwnConfig, OwnPrefiller};
use crate::setup::gen1::{
    at_consecutive_ports, columns_of, expected, layout, ranks, Gen1Setup, Msg, NoConsecutivePorts,
};
use crate::setup::{check_landed_columns, model_config, D_BASE, P_BASE};

use super::{bounded, Case, PlayError, PlayOptions};
use crate::finding::{CheckId, Finding};
use crate::scenarios::{Model, Ready};
use crate::testee::Testee;
use mooncake_testee_protocol::{
    self as proto, Command, DecoderConfig, DecoderStatus, Done, Memory, PrefillerStatus, Pull, RoleConfig, Started,
};

/// The runner plays the decoder(s); the testees are prefiller workers.
pub async fn as_decoder(
    case: &Case,
    opts: &PlayOptions,
    pairing: &crate::crossver::Pairing,
) -> Result<Vec<Finding>, PlayError> {
    let t = &case.model;
    let scenario = opts.scenario_for(t);
    let model = &opts.scenarios.model;
    let Gen1Setup { profile, abort, msgs, by_id, regions, workers, p_tp, d_conns, d_tp } =
        Gen1Setup::new(t, model, &scenario)?;
    let mut out = vec![];
    let mut testees: Vec<(String, Testee)> = vec![];
    let result = async {
        let mut endpoint_map: HashMap<String, String> = HashMap::new();
        for (conn, endpoint, rank) in &workers {
            let (mut te, _) = Testee::start_logged(&opts.testee, opts.testee_log.as_ref()).await?;
            let mut cfg = proto::PrefillerConfig::new(model_config(model), layout(regions, model, p_tp, P_BASE, *rank));
            cfg.tp_rank = *rank as i64;
            cfg.tp_size = p_tp as i64;
            cfg.abort_timeout_s = Some(model.abort_timeout_s);
            let a: Started = te
                .send(&Command::start(&pairing.testee.revision, &RoleConfig::Prefiller(cfg)))
                .await
                .map_err(PlayError::starting("prefiller", conn))?;
            let live = a.endpoint.ok_or(PlayError::Unsaid { role: "prefiller", what: "endpoint" })?;
            endpoint_map.insert(endpoint.clone(), live);
            for (id, tr) in &by_id {
                te.send::<Done>(&Command::Allocate { p_req_id: id.to_string(), transfer_id: id.to_string() }).await?;
                if tr.ready == Ready::Before {
                    te.send::<Done>(&Command::Ready {
                        p_req_id: id.to_string(),
                        transfer_id: id.to_string(),
                        blocks: tr.blocks.to_vec(),
                    })
                    .await?;
                }
            }
            if scenario.fail_transfers > 0 {
                te.send::<Done>(&Command::FailNextTransfer { count: scenario.fail_transfers as u64, ret: -1 }).await?;
            }
            testees.push((conn.clone(), te));
        }
        // Our decoder workers: memory and a transfer-engine server each.
        let mut sessions: HashMap<
            String,
            (String, String, Arc<Mutex<mooncake_wire::proto::memory::Memory>>, LayoutConfig),
        > = HashMap::new();
        let mut servers = vec![];
        for (i, conn) in d_conns.iter().enumerate() {
            let l = layout(regions, model, d_tp, D_BASE, i as u64);
            let memory = Arc::new(Mutex::new(l.memory(false)));
            let listener = TcpListener::bind("127.0.0.1:0").await.map_err(PlayError::runner)?;
            let port = listener.local_addr().map_err(PlayError::runner)?.port();
            servers.push(tokio::spawn(serve_engine(listener, memory.clone())));
            let recorded = msgs
                .iter()
                .find(|m| &m.decoder == conn)
                .map(|m| format!("{}:{}", m.meta.remote_hostname, m.meta.remote_port))
                .unwrap_or_default();
            sessions.insert(conn.clone(), (format!("127.0.0.1:{port}"), recorded, memory, l));
        }
        // Replay every message on a REQ of its own, in recorded order.
        let ctx = zmq::Context::new();
        let (in_tx, mut in_rx) = mpsc::unbounded_channel();
        let reactor = Reactor::start(&ctx, in_tx).map_err(PlayError::runner)?;
        let mut replies_seen = 0usize;
        let mut done_msgs: Vec<usize> = vec![];
        for (k, m) in msgs.iter().enumerate() {
            let live_ep =
                endpoint_map.get(&m.endpoint).cloned().ok_or_else(|| PlayError::NoLivePrefiller(m.endpoint.clone()))?;
            let (session, _, _, l) = &sessions[&m.decoder];
            let (host, port) = session.rsplit_once(':').expect("host:port");
            let mut meta = m.meta.clone();
            meta.remote_hostname = host.to_string();
            meta.remote_port = WireInt::from_u64(port.parse().expect("port"));
            meta.kv_caches_base_addr = l.kv_caches_base_addr.iter().map(|a| WireInt::from_u64(*a)).collect();
            reactor.open_req(k as u64, &live_ep, profile.encode_request(&meta).map_err(PlayError::runner)?);
            let msg = format!("message {} ({} → {})", k + 1, m.decoder, m.endpoint);
            let got = loop {
                match tokio::time::timeout(abort * 2 + opts.slack, in_rx.recv()).await {
                    Ok(Some(Incoming::Dealer { id, frames })) if id == k as u64 => break Some(frames),
                    Ok(Some(Incoming::DealerError { error, .. })) => {
                        out.push(
                            Finding::new(CheckId::ZmqConnect, error).at(Some(m.seq), Some(m.line)).about(msg.clone()),
                        );
                        break None;
                    }
                    Ok(Some(_)) => {}
                    _ => break None,
                }
            };
            reactor.close_dealer(k as u64);
            match (got, &m.reply) {
                (None, Some(want)) => out.push(
                    Finding::new(
                        CheckId::ReplyMissing,
                        format!("no reply (recorded: {})", String::from_utf8_lossy(want)),
                    )
                    .at(Some(m.seq), Some(m.line))
                    .about(msg),
                ),
                (Some(_), None) => out.push(
                    Finding::new(CheckId::ReplyExtra, "a reply where vLLM's prefiller sent none")
                        .at(Some(m.seq), Some(m.line))
                        .about(msg),
                ),
                (None, None) => {}
                (Some(frames), Some(want)) => {
                    replies_seen += 1;
                    if frames.len() != 1 {
                        out.push(
                            Finding::new(
                                CheckId::ZmqFrames,
                                format!(
                                    "{} frames at the REQ; the prefiller must send [routing_id, \"\", reply]",
                                    frames.len()
                                ),
                            )
                            .at(Some(m.seq), Some(m.line))
                            .about(msg.clone()),
                        );
                    }
                    let got = frames.last().cloned().unwrap_or_default();
                    if ![&profile.done, &profile.error].contains(&&got) {
                        out.push(
                            Finding::new(
                                CheckId::ZmqRaw,
                                format!("reply {:?} is none of the spec's constants", String::from_utf8_lossy(&got)),
                            )
                            .at(Some(m.seq), Some(m.line))
                            .about(msg.clone()),
                        );
                    }
                    if &got != want {
                        out.push(
                            Finding::new(
                                CheckId::ReplyDiff,
                                format!(
                                    "{:?} vs recorded {:?}",
                                    String::from_utf8_lossy(&got),
                                    String::from_utf8_lossy(want)
                                ),
                            )
                            .at(Some(m.seq), Some(m.line))
                            .about(msg),
                        );
                    } else if got == profile.done {
                        done_msgs.push(k);
                    }
                }
            }
            for (id, tr) in &by_id {
                if tr.ready == Ready::AfterReply(replies_seen) {
                    for (_, te) in testees.iter_mut() {
                        te.send::<Done>(&Command::Ready {
                            p_req_id: id.to_string(),
                            transfer_id: id.to_string(),
                            blocks: tr.blocks.to_vec(),
                        })
                        .await?;
                    }
                }
            }
        }
        drop(reactor);

        // Transfer-engine writes, as a multiset of (recorded session, descriptors, bytes).
        let mut got_writes: Vec<(String, u64, u64)> = vec![];
        for (_, te) in testees.iter_mut() {
            let s: PrefillerStatus = te.status().await?;
            for w in s.writes {
                let recorded = sessions.values().find(|x| x.0 == w.session).map(|x| x.1.clone()).unwrap_or(w.session);
                got_writes.push((recorded, w.descriptors, w.bytes));
            }
        }
        let mut want_writes: Vec<(String, u64, u64)> =
            t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), c.n, c.bytes)).collect();
        got_writes.sort();
        want_writes.sort();
        if got_writes != want_writes && super::applies(&t.trace.header, CheckId::TeCalls) {
            out.push(
                Finding::new(
                    CheckId::TeCalls,
                    format!("(session, descriptors, bytes) {got_writes:?} vs recorded {want_writes:?}"),
                )
                .about("transfer-engine writes"),
            );
        }

        // Landed bytes of the messages answered done.
        let scale = (model.block_bytes(p_tp) / model.block_bytes(d_tp).max(1)).max(1);
        for conn in &d_conns {
            let (_, _, memory, l) = &sessions[conn];
            let exp: Vec<(usize, u64, u64)> = done_msgs
                .iter()
                .map(|k| &msgs[*k])
                .filter(|m| &m.decoder == conn)
                .flat_map(|m| expected(m, &by_id, regions, scale))
                .collect();
            let mem = memory.lock().expect("memory");
            let cols = columns_of(l);
            for p in check_landed_columns(&cols, model.num_blocks, &exp, p_tp == d_tp, |r, b| {
                let bl = *cols.block_lens.get(r)?;
                mem.read(cols.base.get(r)? + b * bl, bl).map(|s| s.to_vec())
            })
            .into_iter()
            .take(5)
            {
                out.push(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
            }
        }

        // Once every timeout has passed: what the prefiller freed, and what it keeps.
        tokio::time::sleep(abort + Duration::from_millis(200)).await;
        let kept: u64 = msgs
            .iter()
            .filter(|m| m.reply.as_ref() == Some(&profile.error))
            .map(|m| m.meta.request_ids.len() as u64)
            .sum::<u64>()
            * matches!(profile.transfer_failure, mooncake_wire::spec::behaviour::TransferFailure::KeptForever) as u64;
        let want_all =
            t.trace.header.observed_outcome.get("finished_sending").and_then(J::as_object).cloned().unwrap_or_default();
        for (conn, te) in testees.iter_mut() {
            let s: PrefillerStatus = te.status().await?;
            let (delivered, expired) = (s.freed(false), s.freed(true));
            let want: Vec<String> = want_all
                .get(conn)
                .and_then(J::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                .unwrap_or_default();
            let differs = delivered.iter().any(|d| !want.contains(d))
                || want.iter().any(|w| !delivered.contains(w) && !expired.contains(w));
            if differs && super::applies(&t.trace.header, CheckId::PFinishedSending) {
                out.push(
                    Finding::new(
                        CheckId::PFinishedSending,
                        format!("freed {delivered:?} after delivery and {expired:?} on expiry; vLLM freed {want:?}"),
                    )
                    .about(conn.clone()),
                );
            }
            let (tr, ex) = (s.tracked_transfers, s.open_exchanges);
            if tr.is_none_or(|n| n > kept) || ex != Some(0) {
                out.push(Finding::new(CheckId::PStateLeak, format!("{tr:?} transfers and {ex:?} exchanges tracked after the abort timeout ({kept} kept forever by design)")).about(conn.clone()));
            }
        }
        for s in servers {
            s.abort();
        }
        Ok::<(), PlayError>(())
    };
    let r = bounded(Duration::from_secs(120) + abort * 4, "the case", result).await.and_then(|x| x);
    for (_, te) in testees {
        te.stop().await;
    }
    r.map(|_| out)
}

/// Binds one generation-1 prefiller of the runner's own per rank at consecutive ports on 127.0.0.1 (base +
/// rank), trying a few bases.
async fn bind_workers(
    profile: &Gen1Profile,
    ranks: u64,
    regions: usize,
    model: &Model,
    abort: Duration,
) -> Result<(u64, Vec<OwnPrefiller>), PlayError> {
    let plan_rules = profile.plan_rules().map_err(PlayError::runner)?;
    let workers: Result<_, NoConsecutivePorts<PlayError>> = at_consecutive_ports(ranks, |r, bind| {
        let l = layout(regions, model, ranks, P_BASE, r);
        let planner = producer_with(r as i64, ranks as i64, 1, &model_config(model), &l, plan_rules, None);
        let profile = profile.clone();
        async move {
            let mut core = Gen1Prefiller::new(profile, planner.map_err(PlayError::runner)?);
            core.set_abort_timeout(abort);
            Ok(OwnPrefiller::start(OwnConfig { bind, register: None }, core, Arc::new(Mutex::new(l.memory(true))))
                .await?)
        }
    })
    .await;
    workers.map_err(|e| PlayError::Ports(Box::new(e)))
}

/// The runner plays the prefiller worker(s); the testees are decoder workers.
pub async fn as_prefiller(
    case: &Case,
    opts: &PlayOptions,
    pairing: &crate::crossver::Pairing,
) -> Result<Vec<Finding>, PlayError> {
    let t = &case.model;
    let scenario = opts.scenario_for(t);
    let model = &opts.scenarios.model;
    let Gen1Setup { profile, abort, msgs, by_id, regions, workers, p_tp, d_conns, d_tp } =
        Gen1Setup::new(t, model, &scenario)?;
    let (base, peers) = bind_workers(&profile, p_tp, regions, model, abort).await?;
    for p in &peers {
        for (id, tr) in &by_id {
            p.allocated(id, id);
            if tr.ready == Ready::Before {
                p.finished(id, id, tr.blocks.clone());
            }
        }
        if scenario.fail_transfers > 0 {
            p.fail_next_writes(scenario.fail_transfers, -1);
        }
    }
    let mut out = vec![];
    let mut testees: Vec<(String, Testee, LayoutConfig)> = vec![];
    let result = async {
        for (rank, conn) in d_conns.iter().enumerate() {
            let (mut te, _) = Testee::start_logged(&opts.testee, opts.testee_log.as_ref()).await?;
            let l = layout(regions, model, d_tp, D_BASE, rank as u64);
            let mut cfg = DecoderConfig::new(l.clone());
            cfg.tp_rank = rank;
            cfg.tp_size = d_tp as usize;
            cfg.recv_timeout_s = Some((abort * 2 + opts.slack).as_secs_f64());
            te.send::<Started>(&Command::start(&pairing.testee.revision, &RoleConfig::Decoder(cfg)))
                .await
                .map_err(PlayError::starting("decoder", conn))?;
            testees.push((conn.clone(), te, l));
        }
        // Each recorded message is one scheduler step of its decoder worker.
        let mut sent_by: HashMap<String, usize> = HashMap::new();
        for m in &msgs {
            let Some((_, te, _)) = testees.iter_mut().find(|(c, _, _)| *c == m.decoder) else { continue };
            let reqs: Vec<Pull> = m
                .meta
                .request_ids
                .iter()
                .zip(&m.meta.block_ids)
                .map(|(d, b)| Pull {
                    d_req_id: d.clone(),
                    blocks: if b.is_empty() { vec![] } else { vec![b.iter().map(|x| unsigned_int(*x)).collect()] },
                    remote_host: Some("127.0.0.1".into()),
                    remote_port: Some(base),
                    ..Default::default()
                })
                .collect();
            te.send::<Done>(&Command::Pull { requests: reqs }).await?;
            *sent_by.entry(m.decoder.clone()).or_default() += 1;
            // Settled: no exchange open.
            let until = tokio::time::Instant::now() + abort * 2 + opts.slack * 2;
            loop {
                let s: DecoderStatus = te.status().await?;
                if s.open_exchanges == Some(0) {
                    break;
                }
                if tokio::time::Instant::now() >= until {
                    out.push(
                        Finding::new(CheckId::DSettle, "the decoder did not settle its pull in time")
                            .at(Some(m.seq), Some(m.line))
                            .about(format!("{} message", m.decoder)),
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;

        // What each prefiller worker received, against the recording.
        let mut got: Vec<(String, Vec<Vec<u8>>)> = vec![];
        for (i, p) in peers.iter().enumerate() {
            let s = p.status().await?;
            let conn = workers.get(i).map(|w| w.0.clone()).unwrap_or_default();
            got.extend(s.wire.into_iter().filter(|(inbound, _)| *inbound).map(|(_, fr)| (conn.clone(), fr)));
        }
        let want: Vec<&Msg> = msgs.iter().collect();
        if got.len() != want.len() {
            out.push(
                Finding::new(
                    CheckId::RequestCount,
                    format!("{} requests arrived, vLLM's decoder sent {}", got.len(), want.len()),
                )
                .about("requests"),
            );
        }
        for (k, (conn, frames)) in got.iter().enumerate() {
            let msg = format!("request {} at {conn}", k + 1);
            if frames.len() != 3 || !frames[1].is_empty() {
                out.push(
                    Finding::new(
                        CheckId::ZmqFrames,
                        format!("{} frames at the ROUTER; a REQ sends [routing_id, \"\", payload]", frames.len()),
                    )
                    .about(msg.clone()),
                );
            }
            let Some(bytes) = frames.last() else { continue };
            match profile.decode_request(bytes) {
                Err(e) => out.push(Finding::new(CheckId::RequestDecode, e.to_string()).about(msg)),
                Ok(live) => {
                    let canonical = profile.encode_request(&live).ok().as_deref() == Some(bytes.as_slice());
                    if !canonical {
                        out.push(
                            Finding::new(
                                CheckId::WireCanonical,
                                format!("{} is not msgspec's encoding of that value", hex::encode(bytes)),
                            )
                            .about(msg.clone()),
                        );
                    }
                    let Some(w) = want.iter().find(|w| {
                        w.meta.request_ids == live.request_ids
                            && ranks(t).iter().any(|r| &r.0 == conn && r.1 == w.endpoint)
                    }) else {
                        out.push(
                            Finding::new(
                                CheckId::RequestDiff,
                                format!("request ids {:?}: no such request recorded at this worker", live.request_ids),
                            )
                            .about(msg),
                        );
                        continue;
                    };
                    let mut d = vec![];
                    if live.block_ids != w.meta.block_ids {
                        d.push(format!("$.block_ids: {:?} vs recorded {:?}", live.block_ids, w.meta.block_ids));
                    }
                    if live.kv_caches_base_addr.len() != w.meta.kv_caches_base_addr.len() {
                        d.push(format!(
                            "$.kv_caches_base_addr: {} regions vs recorded {}",
                            live.kv_caches_base_addr.len(),
                            w.meta.kv_caches_base_addr.len()
                        ));
                    }
                    if !d.is_empty() {
                        out.push(
                            Finding::new(CheckId::RequestDiff, d.join("; ")).at(Some(w.seq), Some(w.line)).about(msg),
                        );
                    }
                }
            }
        }

        // Outcomes against vLLM's.
        let outcome = &t.trace.header.observed_outcome;
        let scale = (model.block_bytes(p_tp) / model.block_bytes(d_tp).max(1)).max(1);
        for (conn, te, l) in testees.iter_mut() {
            let s: DecoderStatus = te.status().await?;
            let o = outcome.get(conn.as_str()).filter(|o| o.get("finished_recving").is_some()).unwrap_or(outcome);
            let list = |v: Option<&J>| -> Vec<String> {
                v.and_then(J::as_array)
                    .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
                    .unwrap_or_default()
            };
            let mut want_fin = list(o.get("finished_recving").and_then(|x| x.get(conn.as_str())));
            let mut got_fin = s.finished.clone();
            want_fin.sort();
            got_fin.sort();
            if got_fin != want_fin && super::applies(&t.trace.header, CheckId::DOutcome) {
                out.push(
                    Finding::new(
                        CheckId::DOutcome,
                        format!("finished {got_fin:?}, vLLM's decoder finished {want_fin:?}"),
                    )
                    .about(conn.clone()),
                );
            }
            if !s.failed.is_empty() {
                out.push(
                    Finding::new(CheckId::DOutcome, "reported failed requests; a generation-1 decoder reports none")
                        .about(conn.clone()),
                );
            }
            if s.open_exchanges != Some(0) {
                out.push(
                    Finding::new(
                        CheckId::DStateLeak,
                        format!("{} exchanges still open", super::count(s.open_exchanges)),
                    )
                    .about(conn.clone()),
                );
            }
            // Landed bytes of the requests it finished.
            let exp: Vec<(usize, u64, u64)> = msgs
                .iter()
                .filter(|m| &m.decoder == conn && m.meta.request_ids.iter().all(|d| got_fin.contains(d)))
                .flat_map(|m| expected(m, &by_id, regions, scale))
                .collect();
            let cols = columns_of(l);
            let mut mem: HashMap<(usize, u64), Vec<u8>> = HashMap::new();
            for r in 0..cols.base.len() {
                let (base, bl) = (cols.base[r], cols.block_lens[r]);
                if let Ok(a) = te.send::<Memory>(&Command::ReadMemory { addr: base, len: bl * model.num_blocks }).await
                {
                    if let Ok(bytes) = hex::decode(&a.hex) {
                        for b in 0..model.num_blocks {
                            mem.insert((r, b), bytes[(b * bl) as usize..((b + 1) * bl) as usize].to_vec());
                        }
                    }
                }
            }
            for p in check_landed_columns(&cols, model.num_blocks, &exp, p_tp == d_tp, |r, b| mem.get(&(r, b)).cloned())
                .into_iter()
                .take(5)
            {
                out.push(Finding::new(CheckId::Landed, p).about(format!("memory of {conn}")));
            }
        }
        Ok::<(), PlayError>(())
    };
    let r = bounded(Duration::from_secs(120) + abort * 4, "the case", result).await.and_then(|x| x);
    for (_, te, _) in testees {
        te.stop().await;
    }
    drop(peers);
    r.map(|_| out)
}
