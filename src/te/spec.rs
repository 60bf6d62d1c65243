//! `spec/transfer-engine/mooncake.toml`: the Transfer Engine's wire facts by engine release, each with its
//! source. Loaded strictly (unknown keys are errors); a test checks that [`super`]'s constants are the spec's.
//! Test-only: nothing but that test reads the file.

use serde::Deserialize;

/// The file's `format`.
pub(crate) const FORMAT: &str = "mooncake-transfer-engine/1";

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // The provenance fields are required of the file, read by no test.
pub(crate) struct EngineSpec {
    pub(crate) format: String,
    pub(crate) name: String,
    pub(crate) doc: String,
    pub(crate) source: String,
    pub(crate) revisions: Vec<EngineRevision>,
    pub(crate) items: Vec<EngineItem>,
}

/// A run of engine releases with one observable wire.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // The provenance fields are required of the file, read by no test.
pub(crate) struct EngineRevision {
    pub(crate) name: String,
    pub(crate) releases: Vec<String>,
    pub(crate) summary: String,
    pub(crate) source: String,
}

/// One fact.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // The provenance fields are required of the file, read by no test.
pub(crate) struct EngineItem {
    pub(crate) name: String,
    pub(crate) value: toml::Value,
    pub(crate) since: String,
    #[serde(default)]
    pub(crate) changed_in: Vec<String>,
    pub(crate) source: String,
    pub(crate) doc: String,
}

/// Why the transfer-engine data file fails to read or its checks ([`EngineSpec::parse`]); its text becomes the
/// [`crate::spec::SpecError`]'s message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EngineSpecError {
    /// Not TOML, or not this file's shape.
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// A `format` other than this module's.
    #[error("format is {found:?}, not {:?}", FORMAT)]
    Format {
        /// The format the file names.
        found: String,
    },
    /// A revision without releases.
    #[error("revision {0} lists no releases")]
    NoReleases(String),
    /// A revision whose name does not follow its releases.
    #[error("revision {name} should be named {want} after its releases")]
    Misnamed {
        /// The name the file gives.
        name: String,
        /// The name its releases make it.
        want: String,
    },
    /// Two revisions whose releases overlap or are out of order.
    #[error("revisions {0} and {1} overlap or are out of order")]
    Overlap(String, String),
    /// An item stated twice.
    #[error("item {0} is stated twice")]
    ItemTwice(String),
    /// An item without a source.
    #[error("item {0} has no source")]
    NoSource(String),
    /// An item whose `since` or `changed_in` names no revision of the file.
    #[error("item {item} names an unknown revision {revision}")]
    UnknownRevision {
        /// The item.
        item: String,
        /// The revision it names.
        revision: String,
    },
}

impl EngineSpec {
    /// The embedded file.
    pub(crate) fn builtin() -> EngineSpec {
        let text = crate::spec::Spec::builtin_files()
            .iter()
            .find(|(p, _)| *p == "transfer-engine/mooncake.toml")
            .expect("spec/transfer-engine/mooncake.toml is embedded")
            .1;
        EngineSpec::parse(text).unwrap_or_else(|e| panic!("spec/{e}"))
    }

    /// Parses and checks a file: format, revision names match their releases, every item's `since` and
    /// `changed_in` name a revision, every item has a source, names are unique.
    pub(crate) fn parse(text: &str) -> Result<EngineSpec, crate::spec::SpecError> {
        Self::parse_checked(text)
            .map_err(|e| crate::spec::SpecError::new("transfer-engine/mooncake.toml", e.to_string()))
    }

    fn parse_checked(text: &str) -> Result<EngineSpec, EngineSpecError> {
        let s: EngineSpec = toml::from_str(text)?;
        if s.format != FORMAT {
            return Err(EngineSpecError::Format { found: s.format });
        }
        for r in &s.revisions {
            let want = match (r.releases.first(), r.releases.last()) {
                (Some(a), Some(b)) if a == b => format!("mooncake-{a}"),
                (Some(a), Some(b)) => format!("mooncake-{a}..{b}"),
                _ => return Err(EngineSpecError::NoReleases(r.name.clone())),
            };
            if r.name != want {
                return Err(EngineSpecError::Misnamed { name: r.name.clone(), want });
            }
        }
        for w in s.revisions.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if crate::spec::version_key(a.releases.last().expect("checked")) >= crate::spec::version_key(&b.releases[0])
            {
                return Err(EngineSpecError::Overlap(a.name.clone(), b.name.clone()));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for i in &s.items {
            if !seen.insert(&i.name) {
                return Err(EngineSpecError::ItemTwice(i.name.clone()));
            }
            if i.source.trim().is_empty() {
                return Err(EngineSpecError::NoSource(i.name.clone()));
            }
            for r in std::iter::once(&i.since).chain(&i.changed_in) {
                if !s.revisions.iter().any(|x| &x.name == r) {
                    return Err(EngineSpecError::UnknownRevision { item: i.name.clone(), revision: r.clone() });
                }
            }
        }
        Ok(s)
    }

    /// An item by name.
    pub(crate) fn item(&self, name: &str) -> Option<&EngineItem> {
        self.items.iter().find(|i| i.name == name)
    }

    /// An integer item's value.
    pub(crate) fn int(&self, name: &str) -> Option<i64> {
        self.item(name).and_then(|i| i.value.as_integer())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::data::{Header, Opcode, Status, HEADER_LEN, STATUS_MAGIC, V2_FLAG};
    use crate::te::handshake::MsgType;

    #[test]
    fn the_code_uses_the_specs_numbers() {
        let s = EngineSpec::builtin();
        let int = |n: &str| s.int(n).unwrap_or_else(|| panic!("{n} is not an integer item"));
        assert_eq!(int("handshake.max_length"), crate::limits::MAX_TE_HANDSHAKE_BYTES as i64);
        for (n, t) in [
            ("connection", MsgType::Connection),
            ("metadata", MsgType::Metadata),
            ("notify", MsgType::Notify),
            ("probe", MsgType::Probe),
        ] {
            assert_eq!(Some(int(&format!("handshake.type.{n}")) as u8), t.byte(), "{n}");
        }
        assert_eq!(int("data.header_length"), HEADER_LEN as i64);
        let h = |op, v2| Header { size: 1, addr: 1, op, v2 }.encode()[16] as i64;
        assert_eq!(int("data.opcode.read"), h(Opcode::Read, false));
        assert_eq!(int("data.opcode.write"), h(Opcode::Write, false));
        assert_eq!(int("data.opcode.v2_flag"), V2_FLAG as i64);
        assert_eq!(int("data.status.magic") as u64, STATUS_MAGIC);
        let code = |st: Status| (u64::from_le_bytes(st.encode()) & 0xffff_ffff) as i64;
        assert_eq!(int("data.status.ok"), code(Status::Ok));
        assert_eq!(int("data.status.addr_rejected"), code(Status::AddrRejected));
        assert_eq!(int("segment.tcp_proto_version"), 2);
        assert_eq!(int("data.lanes_per_peer"), 4);
    }

    #[test]
    fn bad_files_are_refused() {
        let (_, text) =
            crate::spec::Spec::builtin_files().iter().find(|(p, _)| *p == "transfer-engine/mooncake.toml").unwrap();
        for (from, to, want) in [
            ("mooncake-transfer-engine/1", "mooncake-transfer-engine/9", "format"),
            ("name = \"mooncake-0.3.13.post1\"", "name = \"mooncake-0.3.14\"", "should be named"),
            ("since = \"mooncake-0.3.13.post1\"", "since = \"mooncake-9\"", "unknown revision"),
            ("doc = \"Type byte Notify.\"", "doc = \"x\"\nbogus = 1", "unknown field"),
        ] {
            let bad = text.replacen(from, to, 1);
            assert_ne!(&bad, text, "{from}");
            let e = EngineSpec::parse(&bad).unwrap_err();
            assert!(e.msg.contains(want), "{from}: {e}");
        }
    }
}
