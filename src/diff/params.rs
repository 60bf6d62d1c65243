//! `kv_transfer_params` and environment rules. The router writes `kv_transfer_params` into each request and
//! the connector reads the keys it knows, so an unknown key is ignored; the spec does not record whether a
//! connector requires a key, so a key the router may not set is for review. Environment variables are local
//! settings: adding or removing one changes nothing on the wire, a new default of a wire-visible number is
//! for review.

use super::ctx::BothWays;
use super::model::{Added, Age, Area, Bytes, Change, Effect, Kind, PeerRole, Peers, Verdict};
use super::types::{incompat, Typed};
use crate::spec::{ConfigKey, Revision};

fn row(
    area: Area,
    kind: Kind,
    subject: String,
    what: String,
    peers: &BothWays,
    orn: (Effect, String),
    nro: (Effect, String),
) -> Change {
    Change::new(
        area,
        kind,
        subject,
        what,
        Verdict::new(orn.0, &peers.old_reads_new, orn.1),
        Verdict::new(nro.0, &peers.new_reads_old, nro.1),
        Bytes::Same,
    )
}

/// The router's `kv_transfer_params` of one revision read by the other revision's connector (`new params → old
/// connector`).
fn router() -> BothWays {
    let (params, connector) = (PeerRole::Other("params".into()), PeerRole::Other("connector".into()));
    BothWays {
        old_reads_new: Peers::new(Age::New, params.clone(), connector.clone()),
        new_reads_old: Peers::new(Age::Old, params, connector),
    }
}

pub(crate) fn diff_params(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let empty = vec![];
    let ko = old.kv_transfer_params.as_ref().map(|k| &k.keys).unwrap_or(&empty);
    let kn = new.kv_transfer_params.as_ref().map(|k| &k.keys).unwrap_or(&empty);
    for k in kn {
        let subject = format!("kv_transfer_params.{}", k.name);
        match ko.iter().find(|o| o.name == k.name) {
            None if k.internal => out.push(row(
                Area::KvTransferParams,
                Kind::KvParam,
                subject,
                format!("added internal `{}: {}` (to {})", k.name, k.ty.python(), k.to),
                &router(),
                (Effect::Compatible, "set by the connector for itself; not exchanged between peers".into()),
                (Effect::Compatible, "set by the connector for itself; not exchanged between peers".into()),
            )),
            None => out.push(row(
                Area::KvTransferParams,
                Kind::KvParam,
                subject,
                format!("added `{}: {}` (to {})", k.name, k.ty.python(), k.to),
                &router(),
                (Effect::Compatible, "old connectors ignore keys they do not know".into()),
                (Effect::Review, "a router written for the old keys does not set it; the spec does not record whether new connectors require it".into()),
            )),
            Some(o) => {
                if o.ty != k.ty {
                    let dir = |w: Typed, r: Typed| match incompat(w, r) {
                        None => (Effect::Compatible, "every value reads as the other type".to_string()),
                        Some(i) if i.shape => (Effect::when(format!("`{}` is set", k.name)), "the value does not read as the other type".into()),
                        Some(i) => (Effect::when(format!("`{}`{} {}", k.name, i.at, i.when)), "only some values read as the other type".into()),
                    };
                    out.push(row(
                        Area::KvTransferParams,
                        Kind::KvParam,
                        subject.clone(),
                        format!("`{}`: `{}` → `{}`", k.name, o.ty.python(), k.ty.python()),
                        &router(),
                        dir(Typed { rev: new, ty: &k.ty }, Typed { rev: old, ty: &o.ty }),
                        dir(Typed { rev: old, ty: &o.ty }, Typed { rev: new, ty: &k.ty }),
                    ));
                }
                if o.to != k.to || o.internal != k.internal {
                    let r = (Effect::Review, "another side sets or reads it".to_string());
                    out.push(row(
                        Area::KvTransferParams,
                        Kind::KvParam,
                        subject,
                        format!("`{}`: to {}{} → to {}{}", k.name, o.to, if o.internal { " (internal)" } else { "" }, k.to, if k.internal { " (internal)" } else { "" }),
                        &router(),
                        r.clone(),
                        r,
                    ));
                }
            }
        }
    }
    for o in ko.iter().filter(|o| !kn.iter().any(|k| k.name == o.name)) {
        let internal = (Effect::Compatible, "set by the connector for itself; not exchanged between peers".to_string());
        out.push(row(
            Area::KvTransferParams,
            Kind::KvParam,
            format!("kv_transfer_params.{}", o.name),
            format!("removed `{}: {}` (to {})", o.name, o.ty.python(), o.to),
            &router(),
            if o.internal {
                internal.clone()
            } else {
                (Effect::Review, "a router written for the new keys does not set it; the spec does not record whether old connectors require it".into())
            },
            if o.internal { internal } else { (Effect::Compatible, "new connectors ignore keys they do not know".into()) },
        ));
    }

    let local = &BothWays { old_reads_new: Peers::Local, new_reads_old: Peers::Local };
    for (name, v) in &new.env {
        match old.env.get(name) {
            None => out.push(
                row(
                    Area::Env,
                    Kind::Env,
                    format!("env.{name}"),
                    format!("added `{name}: {}` = `{}`", v.ty.python(), v.default),
                    local,
                    (Effect::Compatible, "a local setting: nothing on the wire".into()),
                    (Effect::Compatible, "a local setting: nothing on the wire".into()),
                )
                .adds(Added::Env(name.clone())),
            ),
            Some(o) if (o.ty != v.ty || o.default != v.default) && o.local && v.local => {
                let c = (Effect::Compatible, "a setting of this peer alone: nothing another peer observes".to_string());
                out.push(row(
                    Area::Env,
                    Kind::Env,
                    format!("env.{name}"),
                    format!("`{name}`: `{}` = `{}` → `{}` = `{}`", o.ty.python(), o.default, v.ty.python(), v.default),
                    local,
                    c.clone(),
                    c,
                ));
            }
            Some(o) if o.ty != v.ty || o.default != v.default => {
                let r = (Effect::Review, format!("sets a wire-visible number: {}", v.doc));
                out.push(row(
                    Area::Env,
                    Kind::Env,
                    format!("env.{name}"),
                    format!("`{name}`: `{}` = `{}` → `{}` = `{}`", o.ty.python(), o.default, v.ty.python(), v.default),
                    local,
                    r.clone(),
                    r,
                ));
            }
            Some(_) => {}
        }
    }
    for (name, o) in old.env.iter().filter(|(n, _)| !new.env.contains_key(*n)) {
        out.push(row(
            Area::Env,
            Kind::Env,
            format!("env.{name}"),
            format!("removed `{name}: {}` = `{}`", o.ty.python(), o.default),
            local,
            (Effect::Compatible, "a local setting: nothing on the wire".into()),
            (Effect::Compatible, "a local setting: nothing on the wire".into()),
        ));
    }
}

/// The behaviour items of `rev` that name `key` as their `config_key`.
fn items_reading(rev: &Revision, key: &str) -> Vec<String> {
    rev.behaviour
        .rows()
        .into_iter()
        .filter(|(_, v, _)| v.get("config_key").and_then(|k| k.as_str()) == Some(key))
        .map(|(n, _, _)| format!("behaviour.{n}"))
        .collect()
}

/// What setting, unsetting or changing a key does to a mixed pair: nothing when it is local; the behaviour rows'
/// when behaviour items read it; otherwise the spec does not say.
fn key_effect(k: &ConfigKey, items: &[String], what: &str) -> (Effect, String) {
    if k.local {
        (Effect::Compatible, "a setting of this peer alone: nothing another peer observes".into())
    } else if !items.is_empty() {
        (Effect::Compatible, format!("what it sets is {}: those rows carry the effect", items.join(", ")))
    } else {
        (Effect::Review, format!("a deployment setting {what}; the spec ties it to no behaviour item"))
    }
}

/// `kv_connector_extra_config` keys: set per instance (`--kv-transfer-config`), read by the connector. A key
/// only one revision reads is ignored by the other (the config is a plain dict), so the question is only what
/// the key changes.
pub(crate) fn diff_extra_config(old: &Revision, new: &Revision, out: &mut Vec<Change>) {
    let peers = &BothWays::of("instance", "instance");
    let push = |out: &mut Vec<Change>, subject: String, what: String, e: (Effect, String)| {
        out.push(row(Area::ExtraConfig, Kind::ConfigKey, subject, what, peers, e.clone(), e));
    };
    for (name, k) in &new.extra_config {
        let subject = format!("extra_config.{name}");
        match old.extra_config.get(name) {
            None => {
                let e = key_effect(k, &items_reading(new, name), "only new instances read");
                let mut c = row(
                    Area::ExtraConfig,
                    Kind::ConfigKey,
                    subject,
                    format!("added `{name}: {}` = `{}`", k.ty.python(), k.default),
                    peers,
                    e.clone(),
                    e,
                )
                .adds(Added::ConfigKey(name.clone()));
                if !k.local {
                    c = c.note(format!(
                        "old instances ignore `{name}`: a deployment that sets it gets its effect only on new ones"
                    ));
                }
                out.push(c);
            }
            Some(o) if o.ty != k.ty || o.default != k.default || o.local != k.local => {
                let mut items = items_reading(old, name);
                for i in items_reading(new, name) {
                    if !items.contains(&i) {
                        items.push(i);
                    }
                }
                let e = key_effect(k, &items, "whose type or default differs between the two revisions");
                push(
                    out,
                    subject,
                    format!("`{name}`: `{}` = `{}` → `{}` = `{}`", o.ty.python(), o.default, k.ty.python(), k.default),
                    if o.local == k.local {
                        e
                    } else {
                        (Effect::Review, "one revision calls it local, the other not".into())
                    },
                );
            }
            Some(_) => {}
        }
    }
    for (name, o) in old.extra_config.iter().filter(|(n, _)| !new.extra_config.contains_key(*n)) {
        let e = key_effect(o, &items_reading(old, name), "that new instances no longer read");
        push(out, format!("extra_config.{name}"), format!("removed `{name}: {}` = `{}`", o.ty.python(), o.default), e);
    }
}
