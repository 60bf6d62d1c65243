//! The types against `conformance/TESTEE.md`, the protocol's prose: every command the document names is a
//! [`Command`] and the other way round, and the document's JSON examples read as the types say.

use mooncake_testee_protocol::{Command, Hello, Role};

/// The document (in the repository, beside this crate), or `None` after a counted `SKIPPED` line from the packaged
/// crate (`scripts/package-check.sh`), which holds no `conformance/`. In the repository a missing file fails.
fn testee_md() -> Option<String> {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/TESTEE.md");
    match std::fs::read_to_string(p) {
        Ok(t) => Some(t),
        Err(_) if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml.orig")).exists() => {
            println!("SKIPPED: the types against TESTEE.md — the packaged crate has no conformance/TESTEE.md");
            None
        }
        Err(e) => panic!("{p}: {e}"),
    }
}

/// Every `{"cmd": "<name>"` the document writes.
fn documented_commands(doc: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    let mut rest = doc;
    while let Some(i) = rest.find("\"cmd\": \"") {
        rest = &rest[i + 8..];
        let name = &rest[..rest.find('"').expect("closing quote")];
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

#[test]
fn every_documented_command_is_a_command_and_back() {
    let Some(text) = testee_md() else { return };
    let doc = documented_commands(&text);
    assert!(doc.len() >= 5, "found only {doc:?} in TESTEE.md: the reader is broken");
    for name in &doc {
        assert!(Command::NAMES.contains(&name.as_str()), "TESTEE.md documents `{name}`, which is not a Command");
    }
    for name in Command::NAMES {
        assert!(doc.iter().any(|d| d == name), "Command `{name}` is not documented in conformance/TESTEE.md");
    }
}

#[test]
fn names_are_the_serialised_tags() {
    let all = [
        Command::Start { role: Role::Decoder, revision: "r".into(), config: serde_json::json!({}) },
        Command::Allocate { p_req_id: "p".into(), transfer_id: "t".into() },
        Command::Ready { p_req_id: "p".into(), transfer_id: "t".into(), blocks: vec![vec![1]] },
        Command::Abort { transfer_id: "t".into() },
        Command::ForgetLayouts,
        Command::FailNextTransfer { count: 2, ret: -3 },
        Command::Status,
        Command::Pull { requests: vec![] },
        Command::Announce { requests: vec![] },
        Command::ReadMemory { addr: 1, len: 2 },
        Command::Stop,
    ];
    assert_eq!(all.len(), Command::NAMES.len());
    for (c, name) in all.iter().zip(Command::NAMES) {
        let v = serde_json::to_value(c).unwrap();
        assert_eq!(v["cmd"], name, "{c:?}");
        assert_eq!(c.name(), name);
        assert_eq!(&Command::parse(&v).unwrap(), c, "{name} reads back");
    }
}

#[test]
fn the_documented_hello_reads() {
    let Some(doc) = testee_md() else { return };
    let start = doc.find("{\"hello\"").expect("TESTEE.md has a hello example");
    let end = start + doc[start..].find('}').expect("end of the hello") + 1;
    // The example elides revisions with "…": it is still JSON.
    let v: serde_json::Value = serde_json::from_str(&doc[start..end]).expect("the hello example is JSON");
    let h = Hello::parse(&v).unwrap();
    assert!(h.takes(Role::Prefiller) && h.takes(Role::Decoder) && h.takes(Role::Bootstrap), "{h:?}");
    assert!(h.revisions.iter().any(|r| r == "vllm-0.33.0"));
}

#[test]
fn hellos_that_do_not_read_say_why() {
    use mooncake_testee_protocol::HelloError;
    let e = Hello::parse(&serde_json::json!({"ready": true})).unwrap_err();
    assert!(matches!(e, HelloError::NotHello { .. }), "{e:?}");
    assert!(e.to_string().starts_with("the testee's first line is not a mooncake testee hello"), "{e}");
    let e = Hello::parse(&serde_json::json!({"hello": "mooncake-testee", "protocol": 999})).unwrap_err();
    assert_eq!(e, HelloError::Protocol { got: "999".into() });
    assert!(e.to_string().contains("conformance/TESTEE.md"), "{e}");
    let e = Hello::parse(&serde_json::json!({"hello": "mooncake-testee", "protocol": 1, "name": "t", "roles": 3}));
    assert!(matches!(e, Err(HelloError::Malformed { .. })), "{e:?}");
}

#[test]
fn refused_and_unreadable_answers_are_told_apart() {
    use mooncake_testee_protocol::{read_answer, AnswerError, Done, PrefillerStatus};
    let e = read_answer::<Done>(&serde_json::json!({"ok": false, "error": "unsupported: dance"})).unwrap_err();
    assert_eq!(e, AnswerError::Refused("unsupported: dance".into()));
    assert_eq!(e.to_string(), "unsupported: dance");
    let e = read_answer::<Done>(&serde_json::json!({"ok": false})).unwrap_err();
    assert_eq!(e.to_string(), "the testee refused without a reason");
    let e = read_answer::<PrefillerStatus>(&serde_json::json!({"ok": true, "tracked_transfers": "many"})).unwrap_err();
    assert!(matches!(e, AnswerError::Unreadable { .. }), "{e:?}");
    read_answer::<Done>(&serde_json::json!({"ok": true})).unwrap();
}

#[test]
fn unknown_and_bad_commands_are_told_apart() {
    let e = Command::parse(&serde_json::json!({"cmd": "dance"})).unwrap_err();
    assert_eq!(e.to_string(), "unsupported: dance");
    let e = Command::parse(&serde_json::json!({"cmd": "allocate", "p_req_id": "p"})).unwrap_err();
    assert!(e.to_string().starts_with("allocate: missing field `transfer_id`"), "{e}");
    // Keys a command does not know are ignored (TESTEE.md, "Versioning").
    let c = Command::parse(&serde_json::json!({"cmd": "status", "verbose": true})).unwrap();
    assert_eq!(c, Command::Status);
    // Defaults of fail_next_transfer.
    let c = Command::parse(&serde_json::json!({"cmd": "fail_next_transfer"})).unwrap();
    assert_eq!(c, Command::FailNextTransfer { count: 1, ret: -1 });
}

#[test]
fn defaults_are_left_out_of_configs() {
    use mooncake_testee_protocol::{DecoderConfig, LayoutConfig, ModelConfig, PrefillerConfig, RoleConfig};
    let c = Command::start("vllm-0.33.0", &RoleConfig::Decoder(DecoderConfig::new(LayoutConfig::default())));
    let v = serde_json::to_value(&c).unwrap();
    let keys: Vec<&String> = v["config"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["layout"], "a default decoder config sends only its layout: {v}");
    let mut p = PrefillerConfig::new(ModelConfig::new(8), LayoutConfig::default());
    p.abort_timeout_s = Some(3.0);
    let v = serde_json::to_value(Command::start("vllm-0.33.0", &RoleConfig::Prefiller(p.clone()))).unwrap();
    assert_eq!(v["role"], "prefiller");
    assert_eq!(v["config"]["abort_timeout_s"], 3.0);
    assert!(v["config"].get("bootstrap").is_none() && v["config"].get("bind").is_none(), "{v}");
    assert_eq!(v["config"]["model"], serde_json::json!({"total_num_kv_heads": 8}));
    let back: PrefillerConfig = serde_json::from_value(v["config"].clone()).unwrap();
    assert_eq!(back, p);
}
