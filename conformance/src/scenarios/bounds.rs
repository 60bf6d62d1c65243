//! The accepted range of every number in a scenarios file, checked before anything is sized by it: a
//! `--scenarios` file is input, and a negative, NaN or huge timeout or block count must be a clear error
//! (exit 2), not a panic or an allocation of the size it claims.

use super::{Model, PullScenario, Scenario, Scenarios};
use crate::load_error::ScenariosError;

/// The longest time a scenario may state (abort timeout, pull delay, lease), in seconds.
pub const MAX_SECONDS: f64 = 3600.0;
/// The most KV heads, elements per head and tokens per block a model may state.
pub const MAX_MODEL_DIM: u64 = 4096;
/// The most layers a model may state.
pub const MAX_LAYERS: u64 = 512;
/// The most blocks per layer a model may state.
pub const MAX_BLOCKS: u64 = 1 << 20;
/// The most KV-cache bytes one rank of the model may need (layers × blocks × block bytes): a case allocates
/// them, on each side.
pub const MAX_KV_BYTES: u64 = 1 << 30;
/// The largest TP size a scenario may state.
pub const MAX_TP: u64 = 64;
/// The most injected failures or replies a scenario may count.
pub const MAX_COUNT: usize = 1_000_000;

fn range(key: impl Into<String>, value: impl ToString, accepted: impl Into<String>) -> ScenariosError {
    ScenariosError::Range { key: key.into(), value: value.to_string(), accepted: accepted.into() }
}

fn seconds(key: &str, v: f64, zero_ok: bool) -> Result<(), ScenariosError> {
    let low_ok = if zero_ok { v >= 0.0 } else { v > 0.0 };
    if v.is_finite() && low_ok && v <= MAX_SECONDS {
        return Ok(());
    }
    let low = if zero_ok { "0 ≤" } else { "0 <" };
    Err(range(key, v, format!("{low} seconds ≤ {MAX_SECONDS}")))
}

fn within(key: &str, v: u64, lo: u64, hi: u64) -> Result<(), ScenariosError> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(range(key, v, format!("{lo} to {hi}")))
    }
}

/// Checks the model's numbers and what they size.
pub(super) fn check_model(m: &Model) -> Result<(), ScenariosError> {
    seconds("[model] abort_timeout_s", m.abort_timeout_s, false)?;
    within("[model] total_num_kv_heads", m.total_num_kv_heads, 1, MAX_MODEL_DIM)?;
    within("[model] head_size", m.head_size, 1, MAX_MODEL_DIM)?;
    within("[model] block_size", m.block_size, 1, MAX_MODEL_DIM)?;
    within("[model] dtype_bytes", m.dtype_bytes, 1, 8)?;
    within("[model] num_layers", m.num_layers, 1, MAX_LAYERS)?;
    within("[model] num_blocks", m.num_blocks, 1, MAX_BLOCKS)?;
    // Each factor is bounded above, so this product cannot overflow a u64 (2^12·2·2^12·8·2^12·2^9·2^20 < 2^64).
    let bytes = m.num_layers * m.num_blocks * m.block_bytes(1);
    if bytes > MAX_KV_BYTES {
        return Err(range(
            "[model] num_layers × num_blocks × block bytes",
            bytes,
            format!("at most {MAX_KV_BYTES} bytes of KV cache per rank"),
        ));
    }
    Ok(())
}

/// Checks one scenario's numbers against themselves and the model.
pub(super) fn check_scenario(name: &str, s: &Scenario, m: &Model) -> Result<(), ScenariosError> {
    let key = |k: &str| format!("[scenario.{name}] {k}");
    seconds(&key("pull_delay_s"), s.pull_delay_s, true)?;
    for (k, v) in [("prefiller_kv_lease_s", s.prefiller_kv_lease_s), ("decoder_kv_lease_s", s.decoder_kv_lease_s)] {
        if let Some(v) = v {
            seconds(&key(k), v, false)?;
        }
    }
    within(&key("prefiller_tp"), s.prefiller_tp, 1, MAX_TP)?;
    within(&key("decoder_tp"), s.decoder_tp, 1, MAX_TP)?;
    if let Some(h) = s.decoder_head_size {
        within(&key("decoder_head_size"), h, 1, MAX_MODEL_DIM)?;
    }
    if let Some(r) = s.duplicate_register_tp_rank {
        within(&key("duplicate_register_tp_rank"), r, 0, MAX_TP - 1)?;
    }
    within(&key("fail_transfers"), s.fail_transfers as u64, 0, MAX_COUNT as u64)?;
    if let Some(n) = s.forget_layouts_after_reply {
        within(&key("forget_layouts_after_reply"), n as u64, 0, MAX_COUNT as u64)?;
    }
    let last_block = m.num_blocks - 1;
    let transfer_blocks = s.transfers.iter().map(|t| (format!("transfers {}", t.transfer_id), &t.blocks));
    let pull_blocks = s.pulls.iter().flatten().map(|p| (format!("pulls {}", p.d_req_id), &p.blocks));
    for (what, groups) in transfer_blocks.chain(pull_blocks) {
        if let Some(b) = groups.iter().flatten().find(|&&b| b > last_block) {
            return Err(range(
                key(&format!("{what} blocks")),
                b,
                format!("block ids 0 to {last_block} ([model] num_blocks)"),
            ));
        }
    }
    for g in &s.kv_groups {
        // A scenario's groups may name more layers than `[model] num_layers` (a hybrid model of its own).
        if let Some(l) = g.layers.iter().find(|&&l| l >= MAX_LAYERS) {
            return Err(range(key("kv_groups layers"), l, format!("layers 0 to {}", MAX_LAYERS - 1)));
        }
        if let Some(w) = g.sliding_window {
            within(&key("kv_groups sliding_window"), w, 1, u64::from(u32::MAX))?;
        }
    }
    Ok(())
}

/// Checks a whole file.
pub(super) fn check(s: &Scenarios) -> Result<(), ScenariosError> {
    check_model(&s.model)?;
    s.scenario.iter().try_for_each(|(name, sc)| check_scenario(name, sc, &s.model))?;
    s.pull_scenario.iter().try_for_each(|(name, sc)| check_pull_scenario(name, sc, &s.model))
}

/// A pull scenario's decoders and block ids: within the model's blocks, the same count on both sides.
fn check_pull_scenario(name: &str, sc: &PullScenario, m: &Model) -> Result<(), ScenariosError> {
    within(&format!("[pull_scenario.{name}] decoders"), sc.decoders, 1, MAX_TP)?;
    for (i, p) in sc.pulls.iter().enumerate() {
        let key = |k: &str| format!("[pull_scenario.{name}] pulls[{i}].{k}");
        within(&key("decoder"), p.decoder, 0, sc.decoders - 1)?;
        if p.prefiller_blocks.len() != p.decoder_blocks.len() {
            let n = p.decoder_blocks.len();
            return Err(range(
                key("prefiller_blocks"),
                p.prefiller_blocks.len(),
                format!("{n} blocks, as decoder_blocks"),
            ));
        }
        for b in p.prefiller_blocks.iter().chain(&p.decoder_blocks) {
            within(&key("blocks"), *b, 0, m.num_blocks - 1)?;
        }
    }
    Ok(())
}
