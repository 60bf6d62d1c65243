//! `conformance/scenarios.toml`: what a trace cannot show about its scenario (prefiller request ids and
//! blocks, when each becomes ready, injected faults), and the recorded model.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub total_num_kv_heads: u64,
    pub head_size: u64,
    pub block_size: u64,
    pub dtype_bytes: u64,
    pub num_blocks: u64,
    pub abort_timeout_s: f64,
}

impl Model {
    /// Bytes of one block of one layer on a rank of a `tp_size`-way engine.
    pub fn block_bytes(&self, tp_size: u64) -> u64 {
        self.block_size * 2 * self.head_size * self.dtype_bytes * (self.total_num_kv_heads / tp_size.max(1)).max(1)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    Before,
    AfterReply(usize),
    Never,
}

impl<'de> Deserialize<'de> for Ready {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "before" => Ok(Ready::Before),
            "never" => Ok(Ready::Never),
            _ => s
                .strip_prefix("after_reply:")
                .and_then(|n| n.parse().ok())
                .map(Ready::AfterReply)
                .ok_or_else(|| serde::de::Error::custom(format!("ready: {s:?} is not before, never or after_reply:N"))),
        }
    }
}

fn before() -> Ready {
    Ready::Before
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    pub p_req_id: String,
    pub transfer_id: String,
    pub blocks: Vec<Vec<u64>>,
    #[serde(default = "before")]
    pub ready: Ready,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub transfers: Vec<Transfer>,
    #[serde(default)]
    pub fail_transfers: usize,
    #[serde(default)]
    pub forget_layouts_after_reply: Option<usize>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenarios {
    pub format: String,
    pub model: Model,
    #[serde(default)]
    pub scenario: BTreeMap<String, Scenario>,
}

pub const FORMAT: &str = "mooncake-conformance-scenarios/1";

impl Scenarios {
    pub fn load(path: &Path) -> Result<Scenarios, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
    pub fn parse(text: &str) -> Result<Scenarios, String> {
        let s: Scenarios = toml::from_str(text).map_err(|e| e.to_string())?;
        if s.format != FORMAT {
            return Err(format!("format {:?}, expected {FORMAT:?}", s.format));
        }
        Ok(s)
    }
    /// The bundled file.
    pub fn bundled() -> Scenarios {
        Self::parse(include_str!("../scenarios.toml")).expect("the bundled scenarios parse (tested)")
    }
}
