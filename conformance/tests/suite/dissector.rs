//! The Wireshark dissector and the capture writer (issue 31 items 2-3): the committed plugin is the one the spec
//! generates (`BLESS=1` rewrites it, as `tests/generated.rs` does for `schema/`), it carries what the spec says,
//! `pcap` writes captures whose TCP streams carry exactly the trace's sent messages, and — where `tshark` is
//! installed — every bundled trace's capture dissects to exactly its payloads (`scripts/dissector-check.sh`,
//! about 12 s, one and two passes; else `SKIPPED`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mooncake_conformance::bundled::Data;
use mooncake_conformance::capture::capture_all;
use mooncake_conformance::dissector::{lua, PATH};
use mooncake_trace::trace::{Trace, ZmqDir};
use mooncake_wire::spec::Spec;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn the_committed_plugin_is_fresh() {
    let Some(_) = crate::in_repository("tools/wireshark/mooncake.lua", "dissector::the_committed_plugin_is_fresh")
    else {
        return;
    };
    let want = lua(Spec::builtin());
    let p = root().join(PATH);
    if std::fs::read_to_string(&p).ok().as_deref() == Some(want.as_str()) {
        return;
    }
    if std::env::var_os("BLESS").is_some() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, want).unwrap();
        println!("regenerated {PATH}");
        return;
    }
    panic!("{PATH} is stale; run `BLESS=1 cargo test -p mooncake-conformance --test suite -- dissector` and commit it");
}

/// The plugin names every revision, every side-channel message and field, every status member and reply text
/// of the spec, and the bootstrap routes; a spec edit shows in it.
#[test]
fn the_plugin_carries_the_spec() {
    let spec = Spec::builtin();
    let text = lua(spec);
    let mut missing = vec![];
    let mut need = |s: String| {
        if !text.contains(&s) {
            missing.push(s);
        }
    };
    for fam in &spec.families {
        for r in &fam.revisions {
            need(format!("name = \"{}\", family = \"{}\"", r.revision, fam.name));
            for m in &r.transport.messages {
                need(format!("name = \"{}\", encoding = \"{}\"", m.name, m.encoding));
                for f in r.structs.get(&m.name).map(|s| s.fields.as_slice()).unwrap_or_default() {
                    need(format!("{{ name = \"{}\", ty = ", f.name));
                }
            }
            for e in r.enums.values() {
                for m in &e.members {
                    need(format!(
                        "[{}] = {{ name = \"{}\", terminal = {} }}",
                        m.value,
                        m.name,
                        m.terminal.unwrap_or(false)
                    ));
                }
            }
            for t in r.replies.iter().flat_map(|r| &r.texts) {
                need(format!("name = \"{}\", text = ", t.name));
            }
            for route in r.bootstrap.iter().flat_map(|b| &b.routes) {
                need(format!("method = \"{}\", path = \"{}\"", route.method, route.path));
            }
        }
    }
    assert!(missing.is_empty(), "the plugin lacks: {missing:#?}");
    // An edit of the spec changes the plugin: a reply text reworded.
    let files = Spec::builtin_files().iter().map(|(p, t)| {
        let t = if p.ends_with("vllm-0.34.0.toml") {
            t.replace("KV expired on P side before the pull.", "KV gone.")
        } else {
            t.to_string()
        };
        (p.to_string(), t)
    });
    let edited = Spec::from_files(files.collect::<Vec<_>>()).unwrap();
    let other = lua(&edited);
    assert!(other.contains("text = \"KV gone.\"") && !other.contains("KV expired on P side"));
}

/// One TCP stream's bytes in each direction, by (client port, server port).
type Streams = BTreeMap<(u16, u16), (Vec<u8>, Vec<u8>)>;

/// Reads a pcapng file back: the TCP payloads of each connection, client → server and back (the client is the
/// side that sent the SYN).
fn streams(pcap: &[u8]) -> Streams {
    let (mut at, mut out, mut clients) = (0, Streams::new(), std::collections::BTreeSet::new());
    while at < pcap.len() {
        let kind = u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(pcap[at + 4..at + 8].try_into().unwrap()) as usize;
        if kind == 6 {
            let cap = u32::from_le_bytes(pcap[at + 20..at + 24].try_into().unwrap()) as usize;
            let f = &pcap[at + 28..at + 28 + cap];
            let tcp = &f[34..];
            let (src, dst) = (u16::from_be_bytes([tcp[0], tcp[1]]), u16::from_be_bytes([tcp[2], tcp[3]]));
            let flags = tcp[13];
            if flags == 0x02 {
                clients.insert(src);
            }
            let up = clients.contains(&src);
            let key = if up { (src, dst) } else { (dst, src) };
            let e = out.entry(key).or_default();
            if up { &mut e.0 } else { &mut e.1 }.extend_from_slice(&tcp[20..]);
        }
        at += len;
    }
    out
}

/// ZMTP messages of one direction of a stream: after the greeting and the READY command, each message's frames.
fn zmtp_messages(mut b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    assert_eq!(b[0], 0xff, "a greeting first");
    b = &b[64..];
    let (mut out, mut cur) = (vec![], vec![]);
    while !b.is_empty() {
        let flags = b[0];
        let (hdr, len) = if flags & 2 != 0 {
            (9, u64::from_be_bytes(b[1..9].try_into().unwrap()) as usize)
        } else {
            (2, b[1] as usize)
        };
        let body = b[hdr..hdr + len].to_vec();
        b = &b[hdr + len..];
        if flags & 4 != 0 {
            assert_eq!(&body[1..6], b"READY");
            continue;
        }
        cur.push(body);
        if flags & 1 == 0 {
            out.push(std::mem::take(&mut cur));
        }
    }
    out
}

/// Every bundled trace in one capture: each ZeroMQ connection's two directions carry, as ZMTP messages, exactly
/// the trace's sent messages with the frames libzmq puts on the wire (no routing id; a REQ's empty delimiter),
/// every HTTP body is there, no two connections share their ports, and the summaries' frame ranges tile the file.
#[test]
fn captures_carry_exactly_the_sent_messages() {
    let mut traces = vec![];
    for set in ["traces", "traces-pull"] {
        for i in Data::Embedded.traces(set).unwrap() {
            traces.push(Trace::load_input(&i).unwrap());
        }
    }
    let (bytes, sums) = capture_all(&traces).unwrap();
    let mut want: Vec<Vec<Vec<u8>>> = vec![];
    for t in &traces {
        for z in t.zmq().filter(|z| z.dir == ZmqDir::Send) {
            let wire = if z.bound {
                z.frames[1..].to_vec()
            } else if z.socket == "REQ" {
                [vec![vec![]], z.frames.clone()].concat()
            } else {
                z.frames.clone()
            };
            want.push(wire);
        }
    }
    let s = streams(&bytes);
    let mut got: Vec<Vec<Vec<u8>>> = vec![];
    let mut http = String::new();
    for ((_, server), (up, down)) in &s {
        if *server == mooncake_conformance::capture::BOOTSTRAP_PORT {
            http += &String::from_utf8_lossy(up);
            http += &String::from_utf8_lossy(down);
            continue;
        }
        got.extend(zmtp_messages(up));
        got.extend(zmtp_messages(down));
    }
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the capture's ZMTP messages are not the traces' sends");
    for t in &traces {
        for h in t.http() {
            assert!(http.contains(&h.body_raw), "{}: body {} missing", t.path, h.body_raw);
        }
    }
    let packets: usize = sums.iter().map(|s| s.packets).sum();
    let mut next = 1;
    for s in &sums {
        assert_eq!(s.first_packet, next);
        next += s.packets;
    }
    assert_eq!(next - 1, packets);
    let conns: usize = sums.iter().map(|s| s.zmq_connections + s.http_requests).sum();
    assert_eq!(s.len(), conns, "every connection has ports of its own");
}

/// With tshark installed (Debian's `tshark`), every bundled trace dissects to exactly its payloads; the
/// script installs tshark itself, which the default test run does not do.
#[test]
fn every_bundled_trace_dissects_to_its_payloads_under_tshark() {
    let Some(_) = crate::in_repository(
        "scripts/dissector-check.sh",
        "dissector::every_bundled_trace_dissects_to_its_payloads_under_tshark",
    ) else {
        return;
    };
    if Command::new("tshark").arg("--version").output().is_err() {
        println!(
            "SKIPPED: dissector check under tshark — tshark is not installed (scripts/dissector-check.sh installs it and runs the check)"
        );
        return;
    }
    let out = Command::new(root().join("scripts/dissector-check.sh"))
        .arg(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .current_dir(root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let summaries: Vec<&str> = text.lines().filter(|l| l.starts_with("dissector check")).collect();
    assert!(
        out.status.success(),
        "{summaries:?}\n{}",
        text.lines().filter(|l| l.contains("MISMATCH") || l.starts_with("tshark")).collect::<Vec<_>>().join("\n")
    );
    // Both tshark's single pass and two passes, every bundled trace.
    let n = ["traces", "traces-pull"].iter().map(|s| Data::Embedded.traces(s).unwrap().len()).sum::<usize>();
    let want = format!("traces={n} ");
    let clean = summaries.iter().filter(|l| l.contains(&want) && l.contains("traces_with_mismatches=0")).count();
    assert_eq!(clean, 2, "{summaries:?}");
    for s in summaries {
        println!("{s}");
    }
}

/// A transfer-engine session as the wire crate's framing writes it (the P2P handshake, one acknowledged write),
/// in a capture: under tshark the plugin names the handshake type, the descriptor's items, the data port it
/// learns from the target's descriptor, the request header's opcode and the status frame. No recording has
/// transfer-engine traffic (no bytes move in them), so this session is made here.
#[test]
fn a_transfer_engine_session_dissects_under_tshark() {
    let Some(_) = crate::in_repository(
        "tools/wireshark/mooncake.lua",
        "dissector::a_transfer_engine_session_dissects_under_tshark",
    ) else {
        return;
    };
    use mooncake_conformance::capture::pcapng::{flags, End, Pcapng, Segment};
    use mooncake_wire::te::data::{Header, Opcode, Status};
    use mooncake_wire::te::handshake::{encode, MsgType};
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("SKIPPED: transfer-engine dissection under tshark — tshark is not installed (scripts/dissector-check.sh installs it)");
        return;
    }
    let desc = |port: u16, data: u16| {
        format!("{{\"buffers\":[{{\"addr\":140000000,\"length\":4096,\"name\":\"cpu:0\"}}],\"name\":\"127.0.0.1:{port}\",\"protocol\":\"tcp\",\"rdma_server_name\":\"\",\"tcp_data_port\":{data},\"tcp_proto_version\":2,\"timestamp\":\"\"}}\n")
    };
    let ip = [127, 0, 0, 1];
    let mut p = Pcapng::new();
    let mut t = 1_800_000_000_000_000u64;
    let mut conn = |p: &mut Pcapng, c: End, s: End, up: &[u8], down: &[u8]| {
        let (mut cs, mut ss) = (100u32, 900u32);
        let mut put = |p: &mut Pcapng, from_c: bool, fl: u8, pl: &[u8]| {
            t += 10;
            let (src, dst, seq, ack) = if from_c { (c, s, cs, ss) } else { (s, c, ss, cs) };
            p.segment(t, &Segment { src, dst, seq, ack, flags: fl, payload: pl });
            let used = pl.len() as u32 + u32::from(fl & flags::SYN != 0);
            if from_c {
                cs += used
            } else {
                ss += used
            }
        };
        put(p, true, flags::SYN, b"");
        put(p, false, flags::SYN | flags::ACK, b"");
        put(p, true, flags::ACK, b"");
        put(p, true, flags::ACK | flags::PSH, up);
        put(p, false, flags::ACK | flags::PSH, down);
    };
    let (init, rpc, data) = (End { ip, port: 50_000 }, End { ip, port: 15_001 }, End { ip, port: 15_100 });
    conn(
        &mut p,
        init,
        rpc,
        &encode(MsgType::Metadata, desc(16_001, 16_100).as_bytes()),
        &encode(MsgType::Metadata, desc(15_001, 15_100).as_bytes()),
    );
    let mut write = Header { size: 16, addr: 140_000_000, op: Opcode::Write, v2: true }.encode().to_vec();
    write.extend([7u8; 16]);
    conn(&mut p, End { ip, port: 50_001 }, data, &write, &Status::Ok.encode());
    let dir = std::env::temp_dir().join(format!("mc-te-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("te.pcapng"), p.into_bytes()).unwrap();
    let out = Command::new("tshark")
        .args(["-n", "-X"])
        .arg(format!("lua_script:{}", root().join(PATH).display()))
        .arg("-r")
        .arg(dir.join("te.pcapng"))
        .args([
            "-T",
            "fields",
            "-e",
            "mooncake_te.type",
            "-e",
            "mooncake_te.item",
            "-e",
            "mooncake_te.opcode",
            "-e",
            "mooncake_te.size",
            "-e",
            "_ws.col.Info",
        ])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty() && l.contains('\t')).collect();
    let has = |needle: &str| lines.iter().any(|l| l.contains(needle));
    assert!(has("handshake metadata"), "{text}");
    assert!(has("tcp_data_port: 15100") && has("tcp_proto_version: 2"), "{text}");
    assert!(has("write 16"), "the request header on the learnt data port: {text}");
    assert!(has("status ok"), "the status frame: {text}");
    assert!(!text.contains("Lua Error"), "{text}");
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mooncake-conformance")).args(args).output().unwrap()
}

/// The commands' exit codes: `pcap` of a bundled name, of no trace (2), into an unwritable place (3);
/// `dissector --check` of the committed plugin (0) and of another file (1).
#[test]
fn pcap_and_dissector_exit_codes() {
    let Some(_) = crate::in_repository("tools/wireshark/mooncake.lua", "dissector::pcap_and_dissector_exit_codes")
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("mc-pcap-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("a.pcapng");
    let o = cli(&["pcap", "vllm-0.33.0/a_single_success", "--out", out.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["traces"][0]["summary"]["zmq_messages"], 2);
    assert_eq!(v["traces"][0]["summary"]["http_requests"], 2);
    assert_eq!(std::fs::read(&out).unwrap()[..4], [0x0a, 0x0d, 0x0d, 0x0a]);
    let o = cli(&["pcap", "vllm-0.33.0/no_such_scenario", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no bundled trace of that name"));
    let not_trace = dir.join("x.jsonl");
    std::fs::write(&not_trace, "{\"format\": \"other\"}\n").unwrap();
    assert_eq!(cli(&["pcap", not_trace.to_str().unwrap(), "--out", out.to_str().unwrap()]).status.code(), Some(2));
    let o = cli(&["pcap", "vllm-0.33.0/a_single_success", "--out", dir.join("no/such/dir/a.pcapng").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    let committed = root().join(PATH);
    assert_eq!(cli(&["dissector", "--check", "--out", committed.to_str().unwrap()]).status.code(), Some(0));
    std::fs::write(dir.join("old.lua"), "-- an old plugin\n").unwrap();
    let o = cli(&["dissector", "--check", "--out", dir.join("old.lua").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("stale"));
    assert_eq!(cli(&["dissector", "--out", dir.join("new.lua").to_str().unwrap()]).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(dir.join("new.lua")).unwrap(), std::fs::read_to_string(committed).unwrap());
    std::fs::remove_dir_all(&dir).ok();
}
