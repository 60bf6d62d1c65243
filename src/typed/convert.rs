//! Typed 0.33.0 messages ⇄ spec-driven values of any generation-2 revision, by field name. Used to speak an
//! older revision with the typed structs: fields the older struct lacks must hold their 0.33.0 default (else
//! the message cannot be said in that revision), flat block lists (before 0.20.0) carry exactly one group.

use serde_json::{json, Map, Value as J};

use super::{MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status, StrList};
use crate::codec::{Codec, Value};
use crate::msgpack::WireInt;

fn ints(v: &[WireInt]) -> J {
    J::Array(v.iter().map(|i| crate::codec::Codec::to_json(&Value::Int(*i))).collect())
}

fn int(v: &J, path: &str) -> Result<WireInt, String> {
    match (v.as_u64(), v.as_i64()) {
        (Some(u), _) => Ok(u.into()),
        (None, Some(i)) => Ok(i.into()),
        _ => Err(format!("{path}: expected an integer")),
    }
}
fn int_list(v: &J, path: &str) -> Result<Vec<WireInt>, String> {
    v.as_array().ok_or(format!("{path}: expected a list"))?.iter().map(|x| int(x, path)).collect()
}
fn str_list(v: &J, path: &str) -> Result<Vec<String>, String> {
    v.as_array()
        .ok_or(format!("{path}: expected a list"))?
        .iter()
        .map(|x| x.as_str().map(String::from).ok_or(format!("{path}: expected strings")))
        .collect()
}

/// Puts `value` under `key` if the target struct has that field; otherwise it must equal `default`.
fn put(
    m: &mut Map<String, J>,
    fields: &[String],
    key: &str,
    value: J,
    default: J,
    revision: &str,
) -> Result<(), String> {
    if fields.iter().any(|f| f == key) {
        m.insert(key.into(), value);
        Ok(())
    } else if value == default {
        Ok(())
    } else {
        Err(format!("{revision} has no field `{key}`, so {value} cannot be sent"))
    }
}

impl MooncakeXferMetadata {
    /// The value of this message in `codec`'s revision.
    pub fn to_revision(&self, codec: &Codec) -> Result<Value, String> {
        let rev = &codec.revision().revision;
        let st = codec.message_struct("MooncakeXferMetadata").ok_or(format!("{rev} has no MooncakeXferMetadata"))?;
        let fields: Vec<String> = st.fields.iter().map(|f| f.name.clone()).collect();
        // Flat block lists before 0.20.0: `tuple[TransferId, list[int]]`.
        let flat = codec.plan().types
            [st.fields.iter().find(|f| f.name == "req_blocks").map(|f| f.ty).ok_or("no req_blocks")? as usize]
            .clone();
        let flat = match flat {
            crate::codec::Ty::Dict(_, v) => match &codec.plan().types[v as usize] {
                crate::codec::Ty::Tuple(ts) => {
                    matches!(codec.plan().types[ts[1] as usize], crate::codec::Ty::List(e) if matches!(codec.plan().types[e as usize], crate::codec::Ty::Int))
                }
                _ => false,
            },
            _ => false,
        };
        let mut rb = Map::new();
        for (k, b) in &self.req_blocks {
            let blocks = if flat {
                match b.blocks.as_slice() {
                    [] => json!([]),
                    [one] => ints(one),
                    _ => {
                        return Err(format!(
                            "{rev} carries one block list per request; {k} has {} groups",
                            b.blocks.len()
                        ))
                    }
                }
            } else {
                J::Array(b.blocks.iter().map(|g| ints(g)).collect())
            };
            rb.insert(k.clone(), json!([b.transfer_id, blocks]));
        }
        let mut m = Map::new();
        m.insert("remote_hostname".into(), json!(self.remote_hostname));
        m.insert("remote_port".into(), ints(&[self.remote_port])[0].clone());
        m.insert("remote_tp_size".into(), ints(&[self.remote_tp_size])[0].clone());
        m.insert("remote_tp_rank".into(), ints(&[self.remote_tp_rank])[0].clone());
        m.insert("req_blocks".into(), J::Object(rb));
        m.insert("kv_caches_base_addr".into(), ints(&self.kv_caches_base_addr));
        put(&mut m, &fields, "block_lens", ints(&self.block_lens), json!([]), rev)?;
        put(&mut m, &fields, "kv_block_lens", ints(&self.kv_block_lens), json!([]), rev)?;
        put(&mut m, &fields, "registered_layer_names", json!(self.registered_layer_names), json!([]), rev)?;
        put(&mut m, &fields, "registered_layer_indices", ints(&self.registered_layer_indices), json!([]), rev)?;
        put(&mut m, &fields, "registered_group_indices", ints(&self.registered_group_indices), json!([]), rev)?;
        put(
            &mut m,
            &fields,
            "registered_shared_group_ids",
            J::Array(self.registered_shared_group_ids.iter().map(|g| ints(g)).collect()),
            json!([]),
            rev,
        )?;
        put(&mut m, &fields, "registered_row_offsets", ints(&self.registered_row_offsets), json!([]), rev)?;
        put(&mut m, &fields, "remote_pp_size", ints(&[self.remote_pp_size])[0].clone(), json!(1), rev)?;
        put(&mut m, &fields, "layout_id", ints(&[self.layout_id])[0].clone(), json!(0), rev)?;
        codec.from_json("MooncakeXferMetadata", &J::Object(m))
    }

    /// This message from a value decoded in any generation-2 revision (absent fields take 0.33.0 defaults).
    pub fn from_revision(v: &Value) -> Result<Self, String> {
        let j = Codec::to_json(v);
        let get = |k: &str| j.get(k);
        let mut out = MooncakeXferMetadata {
            remote_hostname: get("remote_hostname").and_then(J::as_str).ok_or("remote_hostname")?.to_string(),
            remote_port: int(get("remote_port").ok_or("remote_port")?, "remote_port")?,
            remote_tp_size: int(get("remote_tp_size").ok_or("remote_tp_size")?, "remote_tp_size")?,
            remote_tp_rank: int(get("remote_tp_rank").ok_or("remote_tp_rank")?, "remote_tp_rank")?,
            ..Default::default()
        };
        for (k, pair) in get("req_blocks").and_then(J::as_object).ok_or("req_blocks")? {
            let p = pair.as_array().ok_or("req_blocks value")?;
            let transfer_id = p[0].as_str().ok_or("transfer id")?.to_string();
            let blocks = match p[1].as_array() {
                Some(a) if a.iter().all(|x| x.is_array()) => {
                    a.iter().map(|g| int_list(g, "blocks")).collect::<Result<_, _>>()?
                }
                Some(a) if a.is_empty() => vec![],
                Some(_) => vec![int_list(&p[1], "blocks")?],
                None => return Err("blocks".into()),
            };
            out.req_blocks.push((k.clone(), ReqBlocks { transfer_id, blocks }));
        }
        out.kv_caches_base_addr =
            int_list(get("kv_caches_base_addr").ok_or("kv_caches_base_addr")?, "kv_caches_base_addr")?;
        if let Some(x) = get("block_lens") {
            out.block_lens = int_list(x, "block_lens")?;
        }
        if let Some(x) = get("kv_block_lens") {
            out.kv_block_lens = int_list(x, "kv_block_lens")?;
        }
        if let Some(x) = get("registered_layer_names") {
            out.registered_layer_names = str_list(x, "registered_layer_names")?;
        }
        if let Some(x) = get("registered_layer_indices") {
            out.registered_layer_indices = int_list(x, "registered_layer_indices")?;
        }
        if let Some(x) = get("registered_group_indices") {
            out.registered_group_indices = int_list(x, "registered_group_indices")?;
        }
        if let Some(x) = get("registered_shared_group_ids") {
            out.registered_shared_group_ids = x
                .as_array()
                .ok_or("registered_shared_group_ids")?
                .iter()
                .map(|g| int_list(g, "shared"))
                .collect::<Result<_, _>>()?;
        }
        if let Some(x) = get("registered_row_offsets") {
            out.registered_row_offsets = int_list(x, "registered_row_offsets")?;
        }
        if let Some(x) = get("remote_pp_size") {
            out.remote_pp_size = int(x, "remote_pp_size")?;
        }
        if let Some(x) = get("layout_id") {
            out.layout_id = int(x, "layout_id")?;
        }
        Ok(out)
    }
}

impl MooncakeXferResponse {
    /// The value of this reply in `codec`'s revision (a status the revision lacks cannot be said).
    pub fn to_revision(&self, codec: &Codec) -> Result<Value, String> {
        let rev = &codec.revision().revision;
        let st = codec.message_struct("MooncakeXferResponse").ok_or(format!("{rev} has no MooncakeXferResponse"))?;
        let fields: Vec<String> = st.fields.iter().map(|f| f.name.clone()).collect();
        let mut m = Map::new();
        m.insert("status".into(), json!(self.status.0));
        let opt_list = |l: &Option<StrList>| l.as_ref().map(|v| json!(v)).unwrap_or(J::Null);
        m.insert("ok_reqs".into(), opt_list(&self.ok_reqs));
        m.insert("err_reqs".into(), opt_list(&self.err_reqs));
        m.insert("err_msg".into(), self.err_msg.as_ref().map(|s| json!(s)).unwrap_or(J::Null));
        put(&mut m, &fields, "layout_id", ints(&[self.layout_id])[0].clone(), json!(0), rev)?;
        codec.from_json("MooncakeXferResponse", &J::Object(m))
    }

    pub fn from_revision(v: &Value) -> Result<Self, String> {
        let j = Codec::to_json(v);
        let list = |k: &str| -> Result<Option<Vec<String>>, String> {
            match j.get(k) {
                None | Some(J::Null) => Ok(None),
                Some(x) => str_list(x, k).map(Some),
            }
        };
        Ok(MooncakeXferResponse {
            status: Status(j.get("status").and_then(J::as_i64).ok_or("status")?),
            ok_reqs: list("ok_reqs")?.map(StrList::from),
            err_reqs: list("err_reqs")?.map(StrList::from),
            err_msg: j.get("err_msg").and_then(J::as_str).map(String::from),
            layout_id: match j.get("layout_id") {
                Some(x) => int(x, "layout_id")?,
                None => WireInt::ZERO,
            },
        })
    }
}
