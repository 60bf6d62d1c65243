//! `probe`'s report: a table for people, or one JSON document.

use std::io::{self, Write};

use super::{live::EngineReport, ProbeReport, WorkerReport};

/// Writes the report, as text or JSON.
pub fn write_report(w: &mut impl Write, r: &ProbeReport, json_out: bool) -> io::Result<()> {
    if json_out {
        serde_json::to_writer_pretty(&mut *w, r)?;
        return writeln!(w);
    }
    let engines: std::collections::BTreeSet<&str> = r.workers.iter().map(|x| x.worker.engine_id.as_str()).collect();
    writeln!(
        w,
        "{} workers of {} engines; each request bounded by {:.1} s",
        r.workers.len(),
        engines.len(),
        r.timeout_s
    )?;
    for (url, fits) in &r.query_fits {
        let fits =
            if fits.is_empty() { "no generation-2 revision".to_string() } else { super::identify::range_names(fits) };
        writeln!(w, "bootstrap {url}: GET /query fits the bootstrap model of {fits}")?;
    }
    write_table(w, r)?;
    writeln!(
        w,
        "probe messages ({}, each one frame on a new DEALER; a heartbeat names a transfer id no deployment has):",
        r.probes.len()
    )?;
    for (i, p) in r.probes.iter().enumerate() {
        writeln!(w, "  {}. {} = {}", i + 1, p.label, hex::encode(&p.payload))?;
    }
    write_conditions(w, r)?;
    if !r.indistinguishable.is_empty() {
        writeln!(
            w,
            "cannot be told apart on the wire (same answers to every harmless message): {}",
            r.indistinguishable.join("; ")
        )?;
    }
    for e in &r.engines {
        write_engine(w, e)?;
    }
    if !r.problems.is_empty() {
        writeln!(w, "problems ({}):", r.problems.len())?;
        for p in &r.problems {
            writeln!(w, "  {}: {}", p.kind, p.detail)?;
        }
    }
    let reachable = r.workers.iter().filter(|x| x.unreachable.is_none()).count();
    writeln!(w, "summary: {} workers, {reachable} reachable, {} problems", r.workers.len(), r.problems.len())
}

fn row(x: &WorkerReport, decoder: bool) -> Vec<String> {
    let w = &x.worker;
    let reach = if x.unreachable.is_some() {
        "NO"
    } else if x.no_answer.is_empty() {
        "ok"
    } else {
        "partly"
    };
    let revs = x.identification.as_ref().map_or("-".to_string(), |i| i.range.clone());
    let mut cells = vec![
        w.bootstrap.trim_start_matches("http://").to_string(),
        w.dp_rank.clone(),
        w.tp_rank.clone(),
        w.pp_rank.clone(),
        w.engine_id.clone(),
        w.addr.clone(),
        reach.into(),
        revs,
    ];
    if decoder {
        cells.push(x.pairing.as_ref().map_or("-", |p| p.verdict).to_string());
    }
    cells
}

fn write_table(w: &mut impl Write, r: &ProbeReport) -> io::Result<()> {
    let decoder = r.decoder_revision.is_some();
    let mut head: Vec<String> =
        ["BOOTSTRAP", "DP", "TP", "PP", "ENGINE", "ADDRESS", "ANSWERS", "REVISIONS"].map(String::from).to_vec();
    if let Some(d) = &r.decoder_revision {
        head.push(format!("WITH DECODER {d}"));
    }
    let rows: Vec<Vec<String>> = std::iter::once(head).chain(r.workers.iter().map(|x| row(x, decoder))).collect();
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for cells in &rows {
        let line: Vec<String> = cells.iter().zip(&widths).map(|(c, n)| format!("{c:<n$}")).collect();
        writeln!(w, "  {}", line.join("  ").trim_end())?;
    }
    Ok(())
}

fn write_engine(w: &mut impl Write, e: &EngineReport) -> io::Result<()> {
    if let Some(err) = &e.error {
        return writeln!(w, "engine {}: {err}", e.session);
    }
    let bytes: u64 = e.buffers.iter().map(|(_, n)| n).sum();
    writeln!(
        w,
        "engine {}: protocol {}, {} buffers ({bytes} bytes), tcp_proto_version {}, data port {} {}",
        e.session,
        e.protocol.as_deref().unwrap_or("?"),
        e.buffers.len(),
        e.tcp_proto_version.unwrap_or(1),
        e.data_addr.as_deref().unwrap_or("?"),
        if e.data_unreachable.is_none() { "reachable" } else { "NOT reachable" }
    )
}

/// The conditions of `conditional` pairs, once per revision (not problems: `diff` says they break only when
/// the condition holds).
fn write_conditions(w: &mut impl Write, r: &ProbeReport) -> io::Result<()> {
    let mut seen = std::collections::BTreeMap::new();
    for p in r.workers.iter().filter_map(|x| x.pairing.as_ref()) {
        for (rev, rows) in &p.conditions {
            seen.entry(rev.clone()).or_insert_with(|| rows.clone());
        }
    }
    if seen.is_empty() {
        return Ok(());
    }
    let d = r.decoder_revision.as_deref().unwrap_or("?");
    writeln!(w, "breaks only under a condition (decoder {d}; `diff`'s rows, not problems):")?;
    for (rev, rows) in seen {
        for row in rows {
            writeln!(w, "  {rev}: {row}")?;
        }
    }
    Ok(())
}
