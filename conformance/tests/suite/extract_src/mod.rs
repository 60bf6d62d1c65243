//! Shared by the extraction tests: a revision's declarations written as vLLM writes them, in a temporary tree.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use mooncake_wire::spec::{Revision, StructDef};

pub(crate) struct TempDir(pub(crate) PathBuf);
impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "mooncake-extract-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn class(name: &str, s: &StructDef, base: &str, out: &mut String) {
    let o = &s.options;
    let mut kw = String::new();
    for (k, on) in [
        ("omit_defaults", o.omit_defaults),
        ("array_like", o.array_like),
        ("forbid_unknown_fields", o.forbid_unknown_fields),
        ("dict", o.dict),
        ("frozen", o.frozen),
    ] {
        if on {
            kw.push_str(&format!(", {k}=True"));
        }
    }
    if base.is_empty() {
        out.push_str(&format!("@dataclass\nclass {name}:\n"));
    } else {
        out.push_str(&format!("class {name}({base}{kw}):\n"));
    }
    for f in &s.fields {
        let d = match (&f.default, &f.default_factory) {
            (Some(d), _) => format!(" = {d}"),
            (None, Some(fac)) => format!(" = msgspec.field(default_factory={fac})"),
            _ => String::new(),
        };
        out.push_str(&format!("    {}: {}{d}\n", f.name, f.ty.python()));
    }
    out.push_str("    pass\n\n");
}

/// The revision's declarations as vLLM writes them (one module).
pub(crate) fn python_source(r: &Revision) -> String {
    let mut s = String::from(
        "import msgspec\nfrom dataclasses import dataclass\nfrom enum import IntEnum\n\
         from fastapi import FastAPI, HTTPException\nfrom pydantic import BaseModel\n\n",
    );
    for (n, a) in &r.aliases {
        s.push_str(&format!("{n} = {}\n", a.ty.python()));
    }
    s.push('\n');
    for (n, e) in &r.enums {
        s.push_str(&format!("class {n}(IntEnum):\n"));
        for m in &e.members {
            s.push_str(&format!("    {} = {}\n", m.name, m.value));
        }
        s.push('\n');
    }
    for (n, st) in &r.structs {
        class(n, st, "msgspec.Struct", &mut s);
    }
    let Some(b) = &r.bootstrap else { return s };
    for (n, m) in &b.models {
        match m.kind {
            mooncake_wire::spec::StructKind::Pydantic => class(n, m, "BaseModel", &mut s),
            mooncake_wire::spec::StructKind::Dataclass => class(n, m, "", &mut s),
            _ => {}
        }
    }
    s.push_str("class BootstrapServer:\n    def __init__(self):\n        self.app = FastAPI()\n");
    for (i, rt) in b.routes.iter().enumerate() {
        let model = rt.responses.iter().find(|x| x.status == 200 && x.body.as_deref().is_some_and(|b| b.contains('[')));
        let rm = model.map(|m| format!(", response_model={}", m.body.as_deref().unwrap())).unwrap_or_default();
        s.push_str(&format!("        self.app.{}({:?}{rm})(self.handler{i})\n", rt.method.to_lowercase(), rt.path));
    }
    for (i, rt) in b.routes.iter().enumerate() {
        let arg = rt.request.as_ref().map(|q| format!(", payload: {q}")).unwrap_or_default();
        s.push_str(&format!("\n    async def handler{i}(self{arg}):\n"));
        let ok = rt.responses.iter().find_map(|x| {
            let m = b.models.get(x.body.as_deref()?)?;
            let kv: Vec<String> =
                m.fields.iter().filter_map(|f| Some(format!("{:?}: {:?}", f.name, f.const_value.as_ref()?))).collect();
            (x.status == 200 && !kv.is_empty()).then(|| format!("{{{}}}", kv.join(", ")))
        });
        let ok = ok.unwrap_or_else(|| "self.table".into());
        if rt.request.is_some() && b.duplicate_registration.to_string() == "accept-identical" {
            s.push_str(&format!("        if self.existing == payload.addr:\n            return {ok}\n"));
        }
        for x in rt.responses.iter().filter(|x| x.status >= 400 && x.detail.is_some()) {
            let detail = x.detail.as_deref().unwrap().replace('{', "{payload.");
            s.push_str(&format!(
                "        if self.check():\n            raise HTTPException(status_code={}, detail=f{:?})\n",
                x.status, detail
            ));
        }
        s.push_str(&format!("        return {ok}\n"));
    }
    s
}

/// A Python string literal of `text`, as an f-string whose placeholders (`{name}`, `{name:#x}`) read
/// `self.name`: what vLLM writes for a reply text.
fn fstring(text: &str) -> String {
    let mut out = String::from("f\"");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push_str("{{");
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push_str("}}");
            }
            '{' => out.push_str("{self."),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What the revision's connector sends and reads beyond its declarations, as vLLM's code does it: one answer
/// per reply text (`Struct(status=..., err_msg=f"...")`), one read per `kv_connector_extra_config` key
/// (`get_from_extra_config` and `.kv_connector_extra_config.get`), one read per environment variable through
/// `vllm.envs` (declared by [`envs_py`]), one msgpack decoder per message.
pub(crate) fn python_behaviour(r: &Revision) -> String {
    let mut s = String::from(
        "\nimport msgspec\nfrom vllm import envs\n\n\nclass ConnectorWorker:\n    def __init__(self, cfg):\n",
    );
    for m in r.transport.messages.iter().filter(|m| m.encoding == "msgpack") {
        s.push_str(&format!("        self._decoder_{} = msgspec.msgpack.Decoder({})\n", m.name.to_lowercase(), m.name));
    }
    for (i, (k, c)) in r.extra_config.iter().enumerate() {
        if i % 2 == 0 {
            s.push_str(&format!("        self.config_{i} = cfg.kv_connector_extra_config.get({k:?}, {})\n", c.default));
        } else {
            s.push_str(&format!("        self.config_{i} = cfg.get_from_extra_config({k:?}, {})\n", c.default));
        }
    }
    for (i, n) in r.env.keys().enumerate() {
        s.push_str(&format!("        self.env_{i} = envs.{n}\n"));
    }
    s.push_str("        pass\n");
    // The status enum: the one whose members the texts name.
    let status_enum = r.enums.iter().find(|(_, e)| e.members.iter().any(|m| m.name == "ERROR")).map(|(n, _)| n.clone());
    if let (Some(rp), Some(enum_name)) = (&r.replies, status_enum) {
        for (i, t) in rp.texts.iter().enumerate() {
            let status = match t.status.as_slice() {
                [one] => format!("{enum_name}.{one}"),
                [a, b, ..] => format!("{enum_name}.{a} if self.pending else {enum_name}.{b}"),
                [] => "None".into(),
            };
            s.push_str(&format!(
                "\n    def reply_{i}(self):\n        return {}(status={status}, err_msg={})\n",
                rp.message,
                fstring(&t.text)
            ));
        }
    }
    s
}

/// `vllm/envs.py` declaring the revision's environment variables as vLLM declares them (`if TYPE_CHECKING:`).
pub(crate) fn envs_py(r: &Revision) -> String {
    let mut s = String::from("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n");
    for (n, e) in &r.env {
        let ty = e.ty.python();
        let d = if e.default == "None" || ty == "int" || ty == "float" || ty == "bool" {
            e.default.clone()
        } else {
            format!("{:?}", e.default)
        };
        s.push_str(&format!("    {n}: {ty} = {d}\n"));
    }
    s.push_str("    pass\n");
    s
}

/// A checkout holding `source`, and what the revision's connector sends and reads ([`python_behaviour`]),
/// where the revision's generation keeps its connector; `vllm/envs.py` declares its environment variables.
pub(crate) fn checkout(r: &Revision, source: &str) -> TempDir {
    let d = TempDir::new("src");
    let v1 = d.0.join("vllm/distributed/kv_transfer/kv_connector/v1");
    let file =
        if r.generation == 1 { v1.join("mooncake_connector.py") } else { v1.join("mooncake/mooncake_connector.py") };
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, format!("{source}\n{}", python_behaviour(r))).unwrap();
    std::fs::write(d.0.join("vllm/envs.py"), envs_py(r)).unwrap();
    d
}
