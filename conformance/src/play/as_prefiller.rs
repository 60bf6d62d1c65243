//! The runner plays the recorded prefiller(s) against decoder testee(s): it runs the bootstrap server and one
//! reference prefiller (the sans-IO core with vLLM's planner) per recorded prefiller worker, registered as
//! recorded, makes the scenario's transfers ready, tells each decoder testee to pull what the recorded decoder
//! pulled, and compares every request the testee sends with the recorded one (its own address and port
//! mapped). Then it checks the decoder's outcomes against vLLM's, the bytes that landed in its memory, and that
//! no state is left behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_reference::backend::Backend;
use mooncake_reference::config::{producer, LayoutConfig, ModelConfig};
use mooncake_reference::http::BootstrapServer;
use mooncake_reference::prefiller::{PrefillerConfig, PrefillerPeer};
use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::codec::Codec;
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::proto::{Registry, WireProfile};
use mooncake_wire::typed::MooncakeXferMetadata;
use serde_json::{json, Value as J};

use super::setup::{check_landed, decoder_layout, expected_blocks, prefiller_layout};
use super::{bounded, Case, PlayOptions};
use crate::checks::{check_exchanges, Xchg};
use crate::jsonl::first_difference;
use crate::scenarios::Ready;
use crate::testee::Testee;
use crate::validate::Finding;

fn f(check: &'static str, message: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding { check, seq: None, line: None, message: Some(message.into()), detail: detail.into() }
}

/// The pulls of a decoder conn, in order: consecutive requests with the same `req_blocks` (a fan-out to
/// several prefillers, or a resend after LAYOUT_MISS) are one pull.
fn pull_steps(t: &crate::trace_model::TraceModel, conn: &str) -> Vec<MooncakeXferMetadata> {
    let mut steps: Vec<MooncakeXferMetadata> = vec![];
    for x in t.exchanges.iter().filter(|x| x.decoder == conn) {
        let Some(m) = t.decode_request(&x.request) else { continue };
        if steps.last().is_none_or(|s| s.req_blocks != m.req_blocks) {
            steps.push(m);
        }
    }
    steps
}

pub async fn play(case: &Case, opts: &PlayOptions) -> Result<Vec<Finding>, String> {
    let t = &case.model;
    let profile = t.profile.clone().ok_or("the trace's revision has no generation-2 profile")?;
    let sc = &opts.scenarios;
    let scenario = sc.scenario.get(t.scenario()).cloned().unwrap_or_default();
    let model = &sc.model;
    let abort = Duration::from_secs_f64(model.abort_timeout_s);
    let mut out = vec![];

    let spec = BootstrapSpec::new(t.revision.clone()).ok_or("no bootstrap in this revision")??;
    let boot = BootstrapServer::start("127.0.0.1:0", Registry::new(spec)).await?;
    let ctx = zmq::Context::new();
    let mut prefillers: Vec<(String, PrefillerPeer)> = vec![];
    let mut testees: Vec<(String, Testee)> = vec![];
    let result = async {
        // Our prefillers, registered in the recorded order.
        let mut order: Vec<usize> = (0..t.prefillers.len()).collect();
        order.sort_by_key(|&i| t.http.iter().position(|(r, _)| t.prefillers[i].register.is_some() && r.body == t.prefillers[i].register).unwrap_or(usize::MAX));
        for &i in &order {
            let p = &t.prefillers[i];
            let layout: LayoutConfig = serde_json::from_value(prefiller_layout(t, p, model)?).map_err(|e| e.to_string())?;
            let m = ModelConfig { total_num_kv_heads: model.total_num_kv_heads as i64, use_mla: false, group_kinds: vec![], physical_blocks_per_logical: 1, layer_groups: Default::default(), padded_pages: false };
            let planner = producer(p.tp_rank, p.tp_size, 1, &m, &layout)?;
            let memory = Arc::new(Mutex::new(layout.memory(true)));
            let cfg = PrefillerConfig {
                bind: "tcp://127.0.0.1:*".into(),
                engine_id: p.engine_id.clone(),
                dp_rank: p.dp_rank,
                tp_rank: p.tp_rank,
                pp_rank: p.pp_rank,
                bootstrap: Some(boot.url()),
                abort_timeout: Some(abort),
                record_wire: true,
                faults: vec![],
            };
            let codec = Codec::builtin(&t.revision.revision).expect("built-in");
            let peer = PrefillerPeer::start(&ctx, cfg, WireProfile::new(t.revision.clone(), codec)?, planner, memory, Backend::Tcp).await?;
            for tr in &scenario.transfers {
                peer.allocated(&tr.p_req_id, &tr.transfer_id);
                if tr.ready == Ready::Before {
                    peer.finished(&tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
                }
            }
            if scenario.fail_transfers > 0 {
                peer.fail_next_writes(scenario.fail_transfers, -1);
            }
            prefillers.push((p.conn.clone(), peer));
        }
        // One decoder testee per recorded decoder worker, configured as it registered.
        let mut sessions: HashMap<String, String> = HashMap::new();
        for d in &t.decoders {
            let Some(req) = &d.layout_request else { continue };
            let (mut testee, _) = Testee::start(&opts.testee).await?;
            let cfg = json!({
                "tp_rank": req.remote_tp_rank.as_u64(), "tp_size": req.remote_tp_size.as_u64(), "pp_rank": 0,
                "pp_size": req.remote_pp_size.as_u64(), "layout_id": req.layout_id.as_u64(),
                "abort_timeout_s": model.abort_timeout_s, "layout": decoder_layout(req, model),
            });
            let a = testee.cmd(json!({"cmd": "start", "role": "decoder", "revision": t.revision.revision, "config": cfg})).await.map_err(|e| format!("starting decoder testee {}: {e}", d.conn))?;
            sessions.insert(d.conn.clone(), a.get("session").and_then(J::as_str).unwrap_or("").to_string());
            testees.push((d.conn.clone(), testee));
        }
        let engine = t.prefillers.first().map(|p| p.engine_id.clone()).unwrap_or_default();
        // Pull step by step; after each step, the scenario's actions that the replies so far trigger.
        let steps: Vec<(String, Vec<MooncakeXferMetadata>)> = t.decoders.iter().map(|d| (d.conn.clone(), pull_steps(t, &d.conn))).collect();
        let max_steps = steps.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        let mut done_actions: Vec<String> = vec![];
        for k in 0..max_steps {
            for (conn, s) in &steps {
                let Some(m) = s.get(k) else { continue };
                let Some((_, te)) = testees.iter_mut().find(|(c, _)| c == conn) else { continue };
                let reqs: Vec<J> = m
                    .req_blocks
                    .iter()
                    .map(|(d, rb)| json!({"d_req_id": d, "transfer_id": rb.transfer_id, "blocks": rb.blocks.iter().map(|g| g.iter().map(|b| b.as_u64()).collect::<Vec<_>>()).collect::<Vec<_>>(), "engine_id": engine, "bootstrap_addr": boot.url()}))
                    .collect();
                te.cmd(json!({"cmd": "pull", "requests": reqs})).await?;
            }
            // Wait until every decoder testee settled this step, firing reply-driven actions meanwhile.
            let deadline = tokio::time::Instant::now() + abort * 2 + opts.slack;
            loop {
                let mut sent = 0;
                for (_, p) in &prefillers {
                    if let Ok(s) = p.status().await {
                        sent += s.wire.iter().filter(|(inbound, _)| !inbound).count();
                    }
                }
                for tr in &scenario.transfers {
                    if let Ready::AfterReply(n) = tr.ready {
                        if sent >= n && !done_actions.contains(&tr.transfer_id) {
                            done_actions.push(tr.transfer_id.clone());
                            for (_, p) in &prefillers {
                                p.finished(&tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
                            }
                        }
                    }
                }
                if let Some(n) = scenario.forget_layouts_after_reply {
                    if sent >= n && !done_actions.iter().any(|a| a == "forget") {
                        done_actions.push("forget".into());
                        for (_, p) in &prefillers {
                            p.forget_layouts();
                        }
                    }
                }
                let mut settled = true;
                for (conn, te) in testees.iter_mut() {
                    let s = te.cmd(json!({"cmd": "status"})).await?;
                    let want = steps.iter().find(|(c, _)| c == conn).and_then(|(_, s)| s.get(k)).map(|m| m.req_blocks.len()).unwrap_or(0);
                    let _ = want;
                    if s.get("pending_pulls").and_then(J::as_u64) != Some(0) || s.get("open_exchanges").and_then(J::as_u64) != Some(0) {
                        settled = false;
                    }
                }
                if settled {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    out.push(f("D-SETTLE", format!("pull {}", k + 1), "the decoder did not settle its pulls in time"));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;

        // What the decoder sent, per prefiller worker, against the recording.
        let mut live_xs: Vec<Xchg> = vec![];
        for (conn, p) in &prefillers {
            let s = p.status().await?;
            let inbound: Vec<&Vec<Vec<u8>>> = s.wire.iter().filter(|(i, _)| *i).map(|(_, f)| f).collect();
            let recorded: Vec<&crate::trace_model::Exchange> = t.exchanges.iter().filter(|x| x.prefiller.as_deref() == Some(conn.as_str())).collect();
            if inbound.len() != recorded.len() {
                out.push(f("REQUEST-COUNT", conn.clone(), format!("{} requests arrived, vLLM's decoder sent {}", inbound.len(), recorded.len())));
            }
            for (n, (frames, rx)) in inbound.iter().zip(&recorded).enumerate() {
                let msg = format!("{conn} request {}", n + 1);
                if frames.len() != 2 {
                    out.push(f("ZMQ-FRAMES", msg.clone(), format!("{} frames at the ROUTER; a decoder sends exactly one frame", frames.len())));
                }
                // [routing_id, payload]: any other frame was already reported.
                let bytes = frames.get(1).cloned().unwrap_or_default();
                match profile.decode_metadata(&bytes) {
                    Err(e) => out.push(f("REQUEST-DECODE", msg, e.msgspec_message())),
                    Ok(mut got) => {
                        if profile.encode_metadata(&got).ok().as_deref() != Some(&bytes[..]) {
                            out.push(f("WIRE-CANONICAL", msg.clone(), format!("{} is not msgspec's encoding of that value", hex::encode(&bytes))));
                        }
                        let want = t.decode_request(&rx.request).ok_or("recorded request does not decode")?;
                        // The decoder's own address and transfer-engine port differ per run.
                        let live_session = format!("{}:{}", got.remote_hostname, got.remote_port);
                        if sessions.get(&rx.decoder) != Some(&live_session) {
                            out.push(f("REQUEST-SESSION", msg.clone(), format!("remote_hostname:remote_port {live_session} is not the decoder's transfer-engine endpoint {:?}", sessions.get(&rx.decoder))));
                        }
                        got.remote_hostname = want.remote_hostname.clone();
                        got.remote_port = want.remote_port;
                        let (gv, wv) = (got.to_revision(profile.codec()), want.to_revision(profile.codec()));
                        if let (Ok(gv), Ok(wv)) = (gv, wv) {
                            let (gj, wj) = (Codec::to_json(&gv), Codec::to_json(&wv));
                            if !crate::jsonl::eq_ordered(&gj, &wj) {
                                out.push(f("REQUEST-DIFF", msg, first_difference(&gj, &wj, "$").unwrap_or_default()));
                            }
                        }
                    }
                }
            }
            // The live conversation, for the protocol checks (replies by routing id).
            for (k, frames) in inbound.iter().enumerate() {
                let rid = frames.first().cloned().unwrap_or_default();
                let replies: Vec<Vec<u8>> = s.wire.iter().filter(|(i, f2)| !*i && f2.first() == Some(&rid)).filter_map(|(_, f2)| f2.last().cloned()).collect();
                live_xs.push(Xchg { index: live_xs.len(), decoder: "decoder testee".into(), endpoint: format!("{conn} #{}", k + 1), request: frames.last().cloned().unwrap_or_default(), replies, seq: None, line: None });
            }
        }
        // The layout-less and resend rules hold per endpoint, so index by the prefiller conn.
        for x in live_xs.iter_mut() {
            x.endpoint = x.endpoint.split(" #").next().unwrap_or("").to_string();
        }
        out.extend(check_exchanges(&profile, &live_xs));

        // Outcomes against vLLM's.
        for (conn, te) in testees.iter_mut() {
            let s = te.cmd(json!({"cmd": "status"})).await?;
            let outcome = t.trace.header.observed_outcome.get(conn.as_str()).cloned().unwrap_or_else(|| t.trace.header.observed_outcome.clone());
            let list = |v: Option<&J>| -> Vec<String> { v.and_then(J::as_array).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default() };
            let mut want_fin: Vec<String> = if outcome.get("pull1").is_some() {
                ["pull1", "pull2", "pull3"].iter().flat_map(|p| list(outcome.get(*p).and_then(|o| o.get("finished_recving")).and_then(|o| o.get(conn.as_str())))).collect()
            } else {
                list(outcome.get("finished_recving").and_then(|o| o.get(conn.as_str())))
            };
            let mut got_fin = list(s.get("finished"));
            want_fin.sort();
            got_fin.sort();
            if got_fin != want_fin {
                out.push(f("D-OUTCOME", conn.clone(), format!("finished {got_fin:?}, vLLM's decoder finished {want_fin:?}")));
            }
            let mut want_invalid: Vec<u64> = outcome.get("load_errors").and_then(|o| o.get(conn.as_str())).and_then(|o| o.get("invalid_block_ids")).and_then(J::as_array).map(|a| a.iter().filter_map(J::as_u64).collect()).unwrap_or_default();
            let mut got_invalid: Vec<u64> = s.get("failed").and_then(J::as_array).map(|a| a.iter().flat_map(|x| x.get("invalid_blocks").and_then(J::as_array).cloned().unwrap_or_default()).filter_map(|b| b.as_u64()).collect()).unwrap_or_default();
            want_invalid.sort();
            got_invalid.sort();
            got_invalid.dedup();
            if got_invalid != want_invalid {
                out.push(f("D-OUTCOME", conn.clone(), format!("blocks reported invalid {got_invalid:?}, vLLM reported {want_invalid:?}")));
            }
            if s.get("pending_pulls").and_then(J::as_u64) != Some(0) || s.get("open_exchanges").and_then(J::as_u64) != Some(0) {
                out.push(f("D-STATE-LEAK", conn.clone(), format!("{} pulls and {} exchanges still open", s["pending_pulls"], s["open_exchanges"])));
            }
            // Bytes in the decoder's memory.
            let Some(req) = t.decoders.iter().find(|d| &d.conn == conn).and_then(|d| d.layout_request.clone()) else { continue };
            let mut expected = vec![];
            for step in steps.iter().filter(|(c, _)| c == conn).flat_map(|(_, s)| s) {
                for d in got_fin.iter().filter(|d| !s.get("failed").and_then(J::as_array).is_some_and(|a| a.iter().any(|x| x.get("d_req_id").and_then(J::as_str) == Some(d.as_str())))) {
                    if let Some(e) = expected_blocks(&req, step, d, &scenario) {
                        expected.extend(e.blocks);
                    }
                }
            }
            let p_tp = t.prefillers.first().map(|p| p.tp_size).unwrap_or(1);
            let same_tp = req.remote_tp_size == WireInt::from(p_tp as u64);
            let mut mem: HashMap<(usize, u64), Vec<u8>> = HashMap::new();
            for r in 0..req.kv_caches_base_addr.len() {
                let (Some(base), Some(bl)) = (req.kv_caches_base_addr[r].as_u64(), req.block_lens.get(r).and_then(|b| b.as_u64())) else { continue };
                if let Ok(a) = te.cmd(json!({"cmd": "read_memory", "addr": base, "len": bl * model.num_blocks})).await {
                    if let Some(bytes) = a.get("hex").and_then(J::as_str).and_then(|h| hex::decode(h).ok()) {
                        for b in 0..model.num_blocks {
                            mem.insert((r, b), bytes[(b * bl) as usize..((b + 1) * bl) as usize].to_vec());
                        }
                    }
                }
            }
            for p in check_landed(&req, model.num_blocks, &expected, same_tp, |r, b| mem.get(&(r, b)).cloned()).into_iter().take(5) {
                out.push(f("LANDED", format!("memory of {conn}"), p));
            }
        }
        Ok::<(), String>(())
    };
    let r = bounded(Duration::from_secs(120) + abort * 4, "the case", result).await.and_then(|x| x);
    for (_, te) in testees {
        te.stop().await;
    }
    drop(prefillers);
    drop(boot);
    r.map(|_| out)
}
