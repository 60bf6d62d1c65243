//! `extract` and `diff` on vLLM source, without wheels: a Python module is written from each bundled push
//! revision (the facts of the spec spelled as vLLM declares them: msgspec.Struct classes with their keywords,
//! IntEnums, module-level aliases, a FastAPI bootstrap server with pydantic/dataclass models) and read back by
//! the bundled script. Every revision must come back with its own wire fingerprint and no edit; a copy with a
//! field removed, a default changed and a status added must give the same classified changes as the same three
//! edits written by hand as a spec file. The same mutations on the real 0.33.0 source run when its wheel is
//! cached (else `SKIPPED`). Needs only `python3` (standard library).

use std::path::Path;
use std::process::Command;

use crate::extract_src::{checkout, envs_py, python_behaviour, python_source, TempDir};
use mooncake_conformance::extract;
use mooncake_wire::hash::fingerprint::wire_fingerprint;
use mooncake_wire::spec::Spec;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mooncake-conformance")
}

fn python_ok() -> bool {
    let ok = Command::new(extract::default_python()).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIPPED: extract tests — no {} to run the extraction script", extract::default_python());
    }
    ok
}

#[test]
fn every_revision_written_as_python_extracts_to_itself() {
    if !python_ok() {
        return;
    }
    let push = Spec::builtin().push();
    for r in &push.revisions {
        let src = checkout(r, &python_source(r));
        let d = extract::derive(&src.0, &extract::default_python(), None)
            .unwrap_or_else(|e| panic!("{}: {}", r.revision, e.message));
        assert_eq!(d.edits, 0, "{}: {} edits on {}:\n{}", r.revision, d.edits, d.base, d.text);
        assert_eq!(
            wire_fingerprint(&d.revision).unwrap(),
            wire_fingerprint(r).unwrap(),
            "{}: fingerprint (base {})",
            r.revision,
            d.base
        );
        // Without a release to prefer, a tie goes to the newest revision with the same facts.
        let base = push.revision(&d.base).unwrap();
        assert_eq!(wire_fingerprint(base).unwrap(), wire_fingerprint(r).unwrap(), "{}", r.revision);
        assert_eq!(d.revision.generation, r.generation);
    }
}

#[test]
fn explicit_base_gives_the_edits_of_the_release() {
    if !python_ok() {
        return;
    }
    // vllm-0.33.0's declarations derived on vllm-0.32.0: the three wire edits of spec/push/vllm-0.33.0.toml, its
    // reply text and its four environment variables.
    let spec = Spec::builtin();
    let r = spec.revision("vllm-0.33.0").unwrap();
    let src = checkout(r, &python_source(r));
    let d = extract::derive(&src.0, &extract::default_python(), Some("0.32.0")).unwrap();
    assert_eq!(d.base, "vllm-0.32.0");
    assert_eq!(d.edits, 8, "{}", d.text);
    for want in [
        "enums.MooncakeXferResponseStatus.members",
        "structs.MooncakeXferMetadata.fields",
        "structs.MooncakeXferResponse.fields",
        "replies.texts",
        "env.MC_FORCE_MNNVL",
        "env.MC_INTRANODE_NVLINK",
        "env.MC_USE_TENT",
        "env.MC_USE_TEV1",
    ] {
        assert!(d.text.contains(&format!("at = \"{want}\"")), "{want}:\n{}", d.text);
    }
    assert_eq!(wire_fingerprint(&d.revision).unwrap(), wire_fingerprint(r).unwrap());
    assert!(d.not_derived.iter().any(|n| n.contains("LAYOUT_MISS") && n.contains("terminal")), "{:?}", d.not_derived);
    // The written file is a spec file `diff` reads: its changes are the wire changes of 0.32.0 → 0.33.0,
    // classified alike (the behaviour rows are not derived: they stay 0.32.0's).
    let t = TempDir::new("file");
    let f = t.0.join("proposed.toml");
    std::fs::write(&f, &d.text).unwrap();
    let from_file = changes(&diff_json("vllm-0.32.0", &f));
    let released =
        Command::new(bin()).args(["diff", "vllm-0.32.0", "vllm-0.33.0", "--format", "json"]).output().unwrap();
    let released: serde_json::Value = serde_json::from_slice(&released.stdout).unwrap();
    let wire: Vec<serde_json::Value> =
        changes(&released).into_iter().filter(|c| c["area"] == "struct" || c["area"] == "enum").collect();
    assert_eq!(wire.len(), 3);
    // Notes differ by design: 0.33.0's own notes quote its edits' `why` and its layout caching (behaviour).
    let strip = |v: Vec<serde_json::Value>| -> Vec<serde_json::Value> {
        v.into_iter()
            .map(|mut c| {
                c.as_object_mut().unwrap().remove("notes");
                c
            })
            .collect()
    };
    let (from_wire, from_rest): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
        from_file.into_iter().partition(|c| c["area"] == "struct" || c["area"] == "enum");
    assert_eq!(strip(from_wire), strip(wire));
    // The reply text and the environment variables read from the source: the released revision's rows (a
    // derived reply text has a name of its own; its words and verdicts are the same).
    let rest = |v: &[serde_json::Value]| -> Vec<(String, String, serde_json::Value, serde_json::Value)> {
        v.iter()
            .filter(|c| c["area"] == "env" || c["area"] == "replies")
            .map(|c| {
                (
                    c["area"].to_string(),
                    c["what"].to_string(),
                    c["old_reads_new"]["effect"].clone(),
                    c["new_reads_old"]["effect"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(rest(&from_rest), rest(&changes(&released)));
    assert_eq!(rest(&from_rest).len(), 5);
}

fn diff_json(old: &str, new: &Path) -> serde_json::Value {
    let out = Command::new(bin())
        .args(["diff", old])
        .arg(new)
        .args(["--format", "json", "--allow-breaking"])
        .output()
        .unwrap();
    assert!(out.status.success(), "diff {old} {}: {}", new.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The changes of a diff report without the new side's name (witness messages are the codec's, kept).
fn changes(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["changes"].as_array().unwrap().clone()
}

const HAND_EDITS: &str = r#"format = "mooncake-wire-spec/2"
family = "push"
revision = "vllm-0.33.1"
base = "vllm-0.33.0"
generation = 2
releases = ["0.33.1"]
source = "test: a deliberately edited 0.33.0"
summary = "remote_pp_size removed, MooncakeXferResponse.layout_id defaults to 1, status LAYOUT_STALE = 4"

[[edit]]
op = "remove"
at = "structs.MooncakeXferMetadata.fields.remote_pp_size"

[[edit]]
op = "set"
at = "structs.MooncakeXferResponse.fields.layout_id.default"
value = "1"

[[edit]]
op = "insert"
at = "enums.MooncakeXferResponseStatus.members"
item = { name = "LAYOUT_STALE", value = 4 }
"#;

fn hand_written() -> (TempDir, serde_json::Value) {
    let d = TempDir::new("hand");
    let f = d.0.join("vllm-0.33.1.toml");
    std::fs::write(&f, HAND_EDITS).unwrap();
    let v = diff_json("vllm-0.33.0", &f);
    (d, v)
}

fn check_mutated(v: &serde_json::Value, hand: &serde_json::Value, what: &str) {
    let subjects: Vec<&str> = v["changes"].as_array().unwrap().iter().map(|c| c["subject"].as_str().unwrap()).collect();
    assert_eq!(
        subjects,
        [
            "MooncakeXferMetadata.remote_pp_size",
            "MooncakeXferResponse.layout_id",
            "MooncakeXferResponseStatus.LAYOUT_STALE"
        ],
        "{what}: {v:#}"
    );
    assert_eq!(changes(v), changes(hand), "{what}: the source's changes are classified as the hand-written edits'");
    assert_eq!(v["counts"], hand["counts"], "{what}");
}

#[test]
fn an_edited_copy_gives_the_hand_written_changes() {
    if !python_ok() {
        return;
    }
    let mut r = (**Spec::builtin().revision("vllm-0.33.0").unwrap()).clone();
    r.structs.get_mut("MooncakeXferMetadata").unwrap().fields.retain(|f| f.name != "remote_pp_size");
    let resp = r.structs.get_mut("MooncakeXferResponse").unwrap();
    resp.fields.iter_mut().find(|f| f.name == "layout_id").unwrap().default = Some("1".into());
    let status = r.enums.get_mut("MooncakeXferResponseStatus").unwrap();
    let mut m = status.members[0].clone();
    m.name = "LAYOUT_STALE".into();
    m.value = 4;
    status.members.push(m);
    let src = checkout(&r, &python_source(&r));
    let (_keep, hand) = hand_written();
    check_mutated(&diff_json("vllm-0.33.0", &src.0), &hand, "written from the spec");
}

#[test]
fn an_edited_copy_of_the_real_033_source_gives_the_hand_written_changes() {
    if !python_ok() {
        return;
    }
    let cache = extract::proof::cache_dir();
    let Some(wheel) = extract::proof::cached_wheels(&cache)
        .into_iter()
        .find(|w| w.file_name().unwrap().to_string_lossy().starts_with("vllm-0.33.0-"))
    else {
        println!(
            "SKIPPED: extract on an edited copy of vLLM 0.33.0's source — no vllm 0.33.0 wheel in {}",
            cache.display()
        );
        return;
    };
    // The connector package, copied out of the wheel and edited as a contributor would.
    let d = TempDir::new("real");
    let pkg = d.0.join("mooncake");
    std::fs::create_dir_all(&pkg).unwrap();
    let list = Command::new(extract::default_python())
        .args(["-c", "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in z.namelist():\n    p = 'vllm/distributed/kv_transfer/kv_connector/v1/mooncake/'\n    if n.startswith(p) and '/' not in n[len(p):] and n.endswith('.py'):\n        open(sys.argv[2] + '/' + n[len(p):], 'wb').write(z.read(n))\n"])
        .arg(&wheel)
        .arg(&pkg)
        .status()
        .unwrap();
    assert!(list.success());
    let file = pkg.join("mooncake_connector.py");
    let text = std::fs::read_to_string(&file).unwrap();
    let meta = text.find("class MooncakeXferMetadata(").unwrap();
    let resp = text.find("class MooncakeXferResponse(").unwrap();
    let mut edited = text.clone();
    // MooncakeXferResponse.layout_id: 0 → 1 (its own occurrence, after the class line).
    let at = resp + edited[resp..].find("layout_id: int = 0").unwrap();
    edited.replace_range(at..at + "layout_id: int = 0".len(), "layout_id: int = 1");
    // MooncakeXferMetadata.remote_pp_size removed.
    let at = meta + edited[meta..].find("    remote_pp_size: int = 1\n").unwrap();
    edited.replace_range(at..at + "    remote_pp_size: int = 1\n".len(), "");
    // A status added after LAYOUT_MISS.
    let at = edited.find("    LAYOUT_MISS = 3\n").unwrap() + "    LAYOUT_MISS = 3\n".len();
    edited.insert_str(at, "    LAYOUT_STALE = 4\n");
    assert_ne!(edited, text);
    std::fs::write(&file, edited).unwrap();
    let (_keep, hand) = hand_written();
    check_mutated(&diff_json("vllm-0.33.0", &pkg), &hand, "the real 0.33.0 package, edited");
}

#[test]
fn bad_input_is_a_usage_error_and_names_the_path() {
    if !python_ok() {
        return;
    }
    let d = TempDir::new("bad");
    let f = d.0.join("not_vllm.py");
    std::fs::write(&f, "x = 1\n").unwrap();
    let out = Command::new(bin()).arg("extract").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not_vllm.py") && err.contains("no msgspec.Struct"), "{err}");
    std::fs::write(&f, "class (:\n").unwrap();
    let out = Command::new(bin()).arg("extract").arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(bin()).args(["extract", "/nonexistent/vllm"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(bin()).args(["extract", "--python", "/nonexistent/python3"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn structs_may_live_in_any_file_of_the_package() {
    if !python_ok() {
        return;
    }
    // 0.33.0's declarations spread as a refactor might: aliases and the request in metadata.py, the status and
    // the response (through a field-less base struct holding the options) in protocol.py, the bootstrap server
    // in mooncake_utils.py, and a connector module that only imports them.
    let r = Spec::builtin().revision("vllm-0.33.0").unwrap();
    let whole = python_source(r);
    let cut = |from: &str, to: Option<&str>| -> String {
        let a = whole.find(from).unwrap();
        let b = to.map(|t| whole.find(t).unwrap()).unwrap_or(whole.len());
        whole[a..b].to_string()
    };
    let header = "import msgspec\nfrom dataclasses import dataclass\nfrom enum import IntEnum\nfrom fastapi import FastAPI, HTTPException\nfrom pydantic import BaseModel\n";
    let metadata = format!(
        "{header}\n{}\n{}",
        cut("ReqId = ", Some("class MooncakeXferResponseStatus")),
        cut("class MooncakeXferMetadata(", Some("class MooncakeXferResponse("))
    );
    let response = cut("class MooncakeXferResponse(", Some("class RegisterWorkerPayload")).replace(
        "class MooncakeXferResponse(msgspec.Struct, omit_defaults=True)",
        "class MooncakeXferResponse(_Message)",
    );
    assert!(response.contains("(_Message)"), "{response}");
    let protocol = format!(
        "{header}from .metadata import ReqId\n\n{}\nclass _Message(msgspec.Struct, omit_defaults=True):\n    pass\n\n{response}",
        cut("class MooncakeXferResponseStatus", Some("class MooncakeXferMetadata("))
    );
    let utils =
        format!("{header}from .metadata import EngineId, WorkerAddr\n\n{}", cut("class RegisterWorkerPayload", None));
    let d = TempDir::new("split");
    let pkg = d.0.join("vllm/distributed/kv_transfer/kv_connector/v1/mooncake");
    std::fs::create_dir_all(&pkg).unwrap();
    for (f, t) in [
        ("metadata.py", metadata),
        ("protocol.py", protocol),
        ("mooncake_utils.py", utils),
        ("mooncake_connector.py", "from .protocol import MooncakeXferResponse\n".to_string()),
        ("worker.py", python_behaviour(r)),
    ] {
        std::fs::write(pkg.join(f), t).unwrap();
    }
    std::fs::write(d.0.join("vllm/envs.py"), envs_py(r)).unwrap();
    let got = extract::derive(&d.0, &extract::default_python(), None).unwrap();
    assert_eq!((got.base.as_str(), got.edits), ("vllm-0.33.0", 0), "{}", got.text);
    assert_eq!(wire_fingerprint(&got.revision).unwrap(), wire_fingerprint(r).unwrap());
    assert!(got.not_derived.iter().any(|n| n.contains("_Message") && n.contains("base")), "{:?}", got.not_derived);
    // The package folder itself and a single file are inputs too.
    let pkg_only = extract::derive(&pkg, &extract::default_python(), None).unwrap();
    assert_eq!(wire_fingerprint(&pkg_only.revision).unwrap(), wire_fingerprint(r).unwrap());
    let one = extract::derive(&pkg.join("protocol.py"), &extract::default_python(), None).unwrap();
    assert!(
        one.not_derived.iter().any(|n| n.contains("MooncakeXferMetadata") && n.contains("kept")),
        "{:?}",
        one.not_derived
    );
}

const SPELLINGS: &str = r#"import typing
from typing import Optional, List, Dict, Tuple, Union
import msgspec
from msgspec import Struct
from enum import IntEnum, auto
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

Id: typing.TypeAlias = str


class Kind(IntEnum):
    A = auto()
    B = auto()
    C = 10


class Base(Struct, tag=True, array_like=True):
    pass


class Msg(Base, forbid_unknown_fields=True, kw_only=True):
    a: Optional[List[Id]] = None
    b: "Dict[str, Tuple[int, ...]]" = msgspec.field(default_factory=dict)
    c: Union[int, None] = msgspec.field(default=3)
    d: Kind = Kind.A
    e: Union[int, str] = 0
    f: typing.ClassVar[int] = 1


app = FastAPI()


class Req(BaseModel):
    id: Id


@app.post("/x")
async def x(req: Req):
    raise HTTPException(409, f"taken: {req.id}")


def y():
    return {"ok": "yes"}


app.add_api_route("/y", y, methods=["GET"])
"#;

#[test]
fn the_reader_knows_the_spellings_and_says_what_it_cannot_read() {
    if !python_ok() {
        return;
    }
    let d = TempDir::new("spell");
    let f = d.0.join("proto.py");
    std::fs::write(&f, SPELLINGS).unwrap();
    let facts = extract::read_facts(&f, &extract::default_python()).unwrap();
    let kind = facts.enums.iter().find(|e| e.name == "Kind").expect("an enum a field uses");
    assert_eq!(
        kind.members.iter().map(|m| (m.name.as_str(), m.value)).collect::<Vec<_>>(),
        [("A", 1), ("B", 2), ("C", 10)]
    );
    assert_eq!(facts.aliases["Id"].ty, "str");
    let names: Vec<&str> = facts.structs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["Msg"], "the field-less base is not a message");
    let msg = &facts.structs[0];
    let opts = serde_json::Value::Object(msg.options.clone());
    assert_eq!(
        opts,
        serde_json::json!({"tag": true, "array_like": true, "forbid_unknown_fields": true, "kw_only": true})
    );
    let fields: Vec<(&str, Option<&str>, Option<Option<&str>>, Option<&str>)> = msg
        .fields
        .iter()
        .map(|f| {
            (f.name.as_str(), f.ty.as_deref(), f.default.as_ref().map(|d| d.as_deref()), f.default_factory.as_deref())
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("a", Some("optional[list[Id]]"), Some(Some("None")), None),
            ("b", Some("dict[str, tuple[int, ...]]"), None, Some("dict")),
            ("c", Some("optional[int]"), Some(Some("3")), None),
            ("d", Some("Kind"), Some(None), None),
            ("e", None, Some(Some("0")), None),
        ]
    );
    let nd = facts.not_derived.join("\n");
    for want in [
        "Msg.d: default `Kind.A` is not a literal",
        "Msg.e: type a union other than",
        "kw_only",
        "Base: a field-less base",
    ] {
        assert!(nd.contains(want), "not derived lacks {want:?}:\n{nd}");
    }
    let b = facts.bootstrap.as_ref().expect("the FastAPI routes");
    let routes: Vec<(&str, &str, Option<&str>)> =
        b.routes.iter().map(|r| (r.method.as_str(), r.path.as_str(), r.request.as_deref())).collect();
    assert_eq!(routes, [("POST", "/x", Some("Req")), ("GET", "/y", None)]);
    let x = &b.routes[0].responses;
    assert_eq!((x[0].status, x[0].detail.as_deref()), (409, Some("taken: {id}")));
    assert!(x[1].framework && x[1].status == 422);
    assert_eq!(b.routes[1].responses[0].json.as_ref().unwrap()["ok"], "yes");
    assert_eq!(
        b.models.iter().map(|m| (m.name.as_str(), m.kind.as_str())).collect::<Vec<_>>(),
        [("Req", "pydantic.BaseModel")]
    );
}

#[test]
fn moved_and_added_fields_land_where_the_source_has_them() {
    if !python_ok() {
        return;
    }
    let mut r = (**Spec::builtin().revision("vllm-0.33.0").unwrap()).clone();
    let meta = r.structs.get_mut("MooncakeXferMetadata").unwrap();
    meta.fields.swap(2, 3);
    let moved = meta.fields.remove(5);
    meta.fields.insert(0, moved);
    let mut first = meta.fields[1].clone();
    first.name = "wire_version".into();
    meta.fields.insert(0, first);
    let want: Vec<String> = meta.fields.iter().map(|f| f.name.clone()).collect();
    let src = checkout(&r, &python_source(&r));
    let d = extract::derive(&src.0, &extract::default_python(), Some("vllm-0.33.0")).unwrap();
    let got: Vec<String> = d.revision.structs["MooncakeXferMetadata"].fields.iter().map(|f| f.name.clone()).collect();
    assert_eq!(got, want, "{}", d.text);
    assert_eq!(wire_fingerprint(&d.revision).unwrap(), wire_fingerprint(&r).unwrap());
    // Moved fields keep their docs from the base.
    let doc = |rev: &mooncake_wire::spec::Revision, n: &str| {
        rev.structs["MooncakeXferMetadata"].fields.iter().find(|f| f.name == n).unwrap().doc.clone()
    };
    assert_eq!(doc(&d.revision, "remote_tp_rank"), doc(&r, "remote_tp_rank"));
    assert!(!doc(&d.revision, "remote_tp_rank").is_empty());
}

// ---- what the code sends and reads: reply texts, config keys, environment variables, decoders ----------------

const READS: &str = r#"import os
import msgspec
from enum import IntEnum
from vllm import envs


class Status(IntEnum):
    FINISH = 0
    CONTINUE = 1
    ERROR = 2


class Resp(msgspec.Struct, omit_defaults=True):
    status: Status
    err_msg: str | None = None


class Pull(msgspec.Struct):
    ids: list[str]


class Worker:
    def __init__(self, cfg, extra_config):
        self.n = cfg.kv_connector_extra_config.get("num_workers", 10)
        self.proto = cfg.get_from_extra_config("mooncake_protocol", "rdma")
        self.seg = extra_config.get("preferred_segment")
        self.odd = cfg.kv_connector_extra_config.get(self.key_name, 1)
        self.port = envs.VLLM_MOONCAKE_BOOTSTRAP_PORT
        self.peermem = os.environ.setdefault("WITH_NVIDIA_PEERMEM", "0")
        self.host = os.getenv("MY_HOST")
        self.pull_decoder = msgspec.msgpack.Decoder(Pull)
        if any(v in os.environ for v in ("MC_A", "MC_B")):
            pass

    def serve(self, data):
        return self.pull_decoder.decode(data)

    def answer(self, meta, pending):
        msg = f"layout {meta.layout_id:#x} from {meta.host}"
        a = Resp(status=Status.ERROR, err_msg=msg)
        status = Status.CONTINUE if pending else Status.FINISH
        b = Resp(status=status, err_msg="KV expired on P side before the pull.")
        c = Resp(status=Status.FINISH, err_msg="Timeout {not a placeholder}")
        try:
            pass
        except Exception as e:
            d = Resp(status=Status.ERROR, err_msg=str(e))
        if pending:
            text = "one"
        else:
            text = "two"
        e = Resp(status=Status.ERROR, err_msg=text)
        f = Resp(status=self.status, err_msg="status not read")
        return a, b, c, d, e, f
"#;

#[test]
fn the_reader_finds_reply_texts_config_keys_environment_variables_and_decoders() {
    if !python_ok() {
        return;
    }
    let d = TempDir::new("reads");
    let pkg = d.0.join("vllm/distributed/kv_transfer/kv_connector/v1/mooncake");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("mooncake_connector.py"), READS).unwrap();
    std::fs::write(
        d.0.join("vllm/envs.py"),
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    VLLM_MOONCAKE_BOOTSTRAP_PORT: int = 8998\n",
    )
    .unwrap();
    let facts = extract::read_facts(&d.0, &extract::default_python()).unwrap();
    let replies: Vec<(&str, Vec<&str>)> =
        facts.replies.iter().map(|r| (r.text.as_str(), r.status.iter().map(String::as_str).collect())).collect();
    assert_eq!(
        replies,
        [
            ("layout {layout_id:#x} from {host}", vec!["ERROR"]),
            ("KV expired on P side before the pull.", vec!["CONTINUE", "FINISH"]),
            ("Timeout {{not a placeholder}}", vec!["FINISH"]),
        ],
        "f-strings through a local name, a status through a local name, literal braces doubled"
    );
    assert!(facts.replies.iter().all(|r| r.message == "Resp" && r.site.function.as_deref() == Some("answer")));
    let keys: Vec<(&str, Option<&str>)> =
        facts.extra_config.iter().map(|c| (c.name.as_str(), c.default.as_deref())).collect();
    assert_eq!(
        keys,
        [("num_workers", Some("10")), ("mooncake_protocol", Some("'rdma'")), ("preferred_segment", Some("None"))]
    );
    let env: Vec<(&str, Option<&str>, Option<&str>, &str)> =
        facts.env.iter().map(|e| (e.name.as_str(), e.ty.as_deref(), e.default.as_deref(), e.how.as_str())).collect();
    assert_eq!(
        env,
        [
            ("VLLM_MOONCAKE_BOOTSTRAP_PORT", Some("int"), Some("8998"), "envs"),
            ("WITH_NVIDIA_PEERMEM", Some("str"), Some("0"), "os"),
            ("MY_HOST", Some("optional[str]"), Some("None"), "os"),
            ("MC_A", Some("optional[str]"), Some("None"), "presence"),
            ("MC_B", Some("optional[str]"), Some("None"), "presence"),
        ]
    );
    let dec = &facts.decoders;
    assert_eq!(dec.len(), 1);
    assert_eq!(
        (dec[0].strukt.as_str(), dec[0].target.as_deref(), dec[0].used_in.as_slice()),
        ("Pull", Some("self.pull_decoder"), &["serve".to_string()][..])
    );
    assert!(facts.followed.iter().any(|f| f == "vllm/envs.py"), "{:?}", facts.followed);
    let nd = facts.not_derived.join("\n");
    for want in [
        "`err_msg=str(e)` is not a text the source spells",
        "`err_msg=text` is not a text the source spells",
        "reply text 'status not read'",
        "key `self.key_name` is not a literal",
    ] {
        assert!(nd.contains(want), "not derived lacks {want:?}:\n{nd}");
    }
}

/// A copy of 0.33.0's connector (from the spec, or the real one from its wheel) with a struct no message
/// carries, a reply text and a config key no revision has, each added as a contributor would.
fn add_three(text: &str) -> String {
    let mut t = text.to_string();
    let at = t.find("class MooncakeXferResponse(").expect("the response class");
    t.insert_str(
        at,
        "class MooncakeXferCancel(msgspec.Struct, omit_defaults=True):\n    cancel_ids: list[str] = []\n\n\n",
    );
    t.push_str(
        "\n\n_cancel_decoder = msgspec.msgpack.Decoder(MooncakeXferCancel)\n\n\ndef _cancel_answer(kv_transfer_config):\n    timeout = kv_transfer_config.kv_connector_extra_config.get(\"cancel_timeout\", 5)\n    return MooncakeXferResponse(\n        status=MooncakeXferResponseStatus.ERROR,\n        err_msg=f\"Transfer cancelled after {timeout} s.\",\n    )\n",
    );
    t
}

fn check_three(pkg: &Path, what: &str) {
    let out = Command::new(bin()).args(["diff", "vllm-0.33.0"]).arg(pkg).args(["--format", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{what}: {}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = changes(&v);
    let find = |s: &str| {
        rows.iter().find(|c| c["subject"].as_str().is_some_and(|x| x.starts_with(s))).unwrap_or_else(|| {
            panic!("{what}: no row {s}: {v:#}");
        })
    };
    let cancel = find("MooncakeXferCancel");
    let reply = rows
        .iter()
        .find(|c| {
            c["area"] == "replies" && c["what"].as_str().unwrap().contains("Transfer cancelled after {timeout} s.")
        })
        .unwrap_or_else(|| panic!("{what}: no reply row: {v:#}"));
    let key = find("extra_config.cancel_timeout");
    for (c, name) in [(cancel, "struct"), (reply, "reply text"), (key, "config key")] {
        assert!(c["unspecified"].as_str().is_some_and(|u| u.contains("in no revision")), "{what}: {name}: {c:#}");
        assert_eq!(c["old_reads_new"]["effect"], "review", "{what}: {name}: {c:#}");
        assert_eq!(c["new_reads_old"]["effect"], "review", "{what}: {name}: {c:#}");
    }
    assert_eq!(v["counts"]["unspecified"], 3, "{what}: exactly the three additions: {v:#}");
    assert!(v["summary"].as_str().unwrap().contains("3 changes add something in no revision of the spec"), "{v:#}");
    // Announced, the same report exits 0; the Markdown marks the rows.
    let out = Command::new(bin()).args(["diff", "vllm-0.33.0"]).arg(pkg).arg("--allow-breaking").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{what}");
    let md = String::from_utf8_lossy(&out.stdout);
    assert_eq!(md.matches("**(in no spec revision)**").count(), 3, "{what}:\n{md}");
}

#[test]
fn additions_no_revision_describes_are_reported_and_fail_the_diff() {
    if !python_ok() {
        return;
    }
    let r = Spec::builtin().revision("vllm-0.33.0").unwrap();
    let src = checkout(r, &add_three(&python_source(r)));
    let pkg = src.0.join("vllm/distributed/kv_transfer/kv_connector/v1/mooncake");
    // Unchanged, the same copy is no change at all.
    let plain = checkout(r, &python_source(r));
    let out =
        Command::new(bin()).args(["diff", "vllm-0.33.0"]).arg(&plain.0).args(["--format", "summary"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    check_three(&src.0, "written from the spec");
    check_three(&pkg, "written from the spec, package folder");
    // `extract` says what it could and could not read of the new struct: a decoder is built for it, but no
    // message of the base carries it.
    let d = extract::derive(&src.0, &extract::default_python(), None).unwrap();
    assert_eq!((d.base.as_str(), d.edits), ("vllm-0.33.0", 3), "{}", d.text);
    assert!(
        d.not_derived.iter().any(|n| n.starts_with("struct MooncakeXferCancel: received (a decoder is built in")
            && n.contains("its socket, sender and answer are not derived")),
        "{:#?}",
        d.not_derived
    );
    assert!(
        d.not_derived.iter().any(|n| n.contains("cancel_timeout") && n.contains("not derived")),
        "{:#?}",
        d.not_derived
    );
}

#[test]
fn additions_to_the_real_033_source_are_reported_and_fail_the_diff() {
    if !python_ok() {
        return;
    }
    let cache = extract::proof::cache_dir();
    let Some(wheel) = extract::proof::cached_wheels(&cache)
        .into_iter()
        .find(|w| w.file_name().unwrap().to_string_lossy().starts_with("vllm-0.33.0-"))
    else {
        println!(
            "SKIPPED: diff on vLLM 0.33.0's source with an added struct, reply text and config key — no vllm 0.33.0 wheel in {}",
            cache.display()
        );
        return;
    };
    let d = TempDir::new("real3");
    let pkg = d.0.join("mooncake");
    std::fs::create_dir_all(&pkg).unwrap();
    let ok = Command::new(extract::default_python())
        .args(["-c", "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor n in z.namelist():\n    p = 'vllm/distributed/kv_transfer/kv_connector/v1/mooncake/'\n    if n.startswith(p) and '/' not in n[len(p):] and n.endswith('.py'):\n        open(sys.argv[2] + '/' + n[len(p):], 'wb').write(z.read(n))\n"])
        .arg(&wheel)
        .arg(&pkg)
        .status()
        .unwrap();
    assert!(ok.success());
    let file = pkg.join("mooncake_connector.py");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, add_three(&text)).unwrap();
    check_three(&pkg, "the real 0.33.0 package, three additions");
}

#[test]
fn the_034_wheel_against_033_lists_the_lease_protocol() {
    if !python_ok() {
        return;
    }
    let cache = extract::proof::cache_dir();
    let Some(wheel) = extract::proof::cached_wheels(&cache)
        .into_iter()
        .find(|w| w.file_name().unwrap().to_string_lossy().starts_with("vllm-0.34.0-"))
    else {
        println!("SKIPPED: diff vllm-0.33.0 <0.34.0 wheel> — no vllm 0.34.0 wheel in {}", cache.display());
        return;
    };
    let out =
        Command::new(bin()).args(["diff", "vllm-0.33.0"]).arg(&wheel).args(["--format", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = changes(&v);
    let has = |f: &dyn Fn(&serde_json::Value) -> bool, what: &str| {
        assert!(rows.iter().any(f), "no {what} row: {v:#}");
    };
    has(&|c| c["subject"] == "transport.messages.MooncakeLeaseHeartbeat" && c["kind"] == "message-added", "heartbeat");
    has(
        &|c| c["area"] == "replies" && c["what"].as_str().unwrap().contains("KV expired on P side before the pull."),
        "expired-pull reply text",
    );
    has(&|c| c["subject"] == "extra_config.kv_lease_duration", "lease configuration key");
    // Read from the wheel, nothing is outside the spec: the breaks are the lease a never-renewing decoder
    // outlives, and a renewing decoder's slow pull that an old prefiller's abort timeout ends.
    assert_eq!(v["counts"]["unspecified"], 0, "{v:#}");
    let breaking: Vec<&str> = rows
        .iter()
        .filter(|c| {
            [&c["old_reads_new"]["effect"], &c["new_reads_old"]["effect"]]
                .iter()
                .any(|e| e.as_str().unwrap().starts_with("breaks"))
        })
        .map(|c| c["subject"].as_str().unwrap())
        .collect();
    assert_eq!(breaking, ["behaviour.kv_leases", "behaviour.lease_renewal"], "{v:#}");
    // The same rows as the two spec revisions give.
    let spec = Command::new(bin()).args(["diff", "vllm-0.33.0", "vllm-0.34.0", "--format", "json"]).output().unwrap();
    let spec: serde_json::Value = serde_json::from_slice(&spec.stdout).unwrap();
    let subjects = |v: &serde_json::Value| {
        changes(v).iter().map(|c| c["subject"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert_eq!(subjects(&v), subjects(&spec));
}

/// Issue 34: bad Python made `extract` exit 3 ("environment") with the script's raw traceback, or hang on a
/// FIFO. Each is now exit 2 with a sentence naming the file; a latin-1 file that says so is read in its
/// encoding; a struct inheriting from itself is read once, with a note; an oversized source is refused.
#[test]
fn bad_sources_are_bad_input_named_by_file_never_a_traceback() {
    if !python_ok() {
        return;
    }
    let d = TempDir::new("bad-sources");
    let w = |name: &str, bytes: &[u8]| {
        let p = d.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let not_utf8 = w("not_utf8.py", b"x = \"\xff\xfe\"\n");
    let deep = w("deep.py", format!("x = {}1{}\n", "(".repeat(100_000), ")".repeat(100_000)).as_bytes());
    let huge = w("huge.py", format!("# {}\n", "x".repeat(9 << 20)).as_bytes());
    let dir = d.0.join("dir.py");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let fifo = d.0.join("fifo.py");
    let made_fifo = Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    let mut cases = vec![
        (not_utf8, "not readable as Python source text"),
        (deep, "deep.py"),
        (huge, "cap on one source file"),
        (dir, "dir.py"),
    ];
    if made_fifo {
        cases.push((fifo, "not a regular file"));
    }
    // A wheel whose connector inflates to 20 MiB from a few kilobytes: refused by its declared size.
    let bomb = d.0.join("bomb.whl");
    let made = Command::new(extract::default_python())
        .arg("-c")
        .arg(format!(
            "import zipfile\nwith zipfile.ZipFile({:?}, 'w', zipfile.ZIP_DEFLATED) as z:\n    z.writestr('vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py', '#' + 'x' * (20 << 20))",
            bomb.display().to_string()
        ))
        .status()
        .unwrap();
    assert!(made.success());
    cases.push((bomb, "cap on one source file"));
    for (path, says) in cases {
        let o = Command::new("timeout").arg("60").arg(bin()).arg("extract").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", path.display());
        assert!(err.contains(says), "{}: no {says:?} in {err}", path.display());
        assert!(!err.contains("Traceback"), "{}: {err}", path.display());
    }
    // Read, not refused: a declared encoding, and a struct that names itself among its bases.
    let latin =
        w("latin.py", b"# -*- coding: latin-1 -*-\nimport msgspec\nclass A(msgspec.Struct):\n    s: str = \"\xe9\"\n");
    let cyclic = w("cyclic.py", b"import msgspec\nclass A(A, msgspec.Struct):\n    x: int\n");
    for path in [latin, cyclic] {
        let o = Command::new(bin()).args(["extract", "--format", "json"]).arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}: {err}", path.display());
    }
    let o = Command::new(extract::default_python())
        .arg("-")
        .arg(d.0.join("cyclic.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(extract::SCRIPT.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    let facts: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(facts["not_derived"].to_string().contains("in a cycle"), "{}", facts["not_derived"]);
}
