//! Every line of every bundled trace is valid under `schema/trace.schema.json`, and the schema rejects what
//! the typed trace parser rejects (checked with a small validator for the keywords the schema uses).

use std::path::PathBuf;

use serde_json::Value as J;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn type_ok(t: &str, v: &J) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        _ => false,
    }
}

/// Validates the keywords the trace schema uses: $ref, oneOf, type, const, enum, required, properties,
/// additionalProperties, items, pattern (hex only).
fn valid(schema: &J, defs: &J, v: &J) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(J::as_str) {
        let name = r.trim_start_matches("#/$defs/");
        return valid(&defs[name], defs, v);
    }
    if let Some(alts) = schema.get("oneOf").and_then(J::as_array) {
        let n = alts.iter().filter(|a| valid(a, defs, v).is_ok()).count();
        return if n == 1 { Ok(()) } else { Err(format!("{n} of oneOf match")) };
    }
    if let Some(t) = schema.get("type") {
        let ok = match t {
            J::String(s) => type_ok(s, v),
            J::Array(a) => a.iter().any(|s| type_ok(s.as_str().unwrap_or(""), v)),
            _ => true,
        };
        if !ok {
            return Err(format!("{v} is not {t}"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(J::as_array) {
        if !e.contains(v) {
            return Err(format!("{v} is not one of {e:?}"));
        }
    }
    if let Some(p) = schema.get("pattern").and_then(J::as_str) {
        assert_eq!(p, "^([0-9a-f]{2})*$", "the test validator knows only the hex pattern");
        let s = v.as_str().unwrap_or("");
        if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("{s:?} is not lowercase hex"));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in schema.get("required").and_then(J::as_array).into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap()) {
                return Err(format!("missing {r}"));
            }
        }
        let props = schema.get("properties").and_then(J::as_object);
        for (k, x) in obj {
            if let Some(ps) = props.and_then(|p| p.get(k)) {
                valid(ps, defs, x).map_err(|e| format!("{k}: {e}"))?;
            } else if let Some(ap) = schema.get("additionalProperties") {
                valid(ap, defs, x).map_err(|e| format!("{k}: {e}"))?;
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            valid(items, defs, x).map_err(|e| format!("[{i}]: {e}"))?;
        }
    }
    Ok(())
}

#[test]
fn bundled_traces_follow_the_schema() {
    let Some(_) = crate::in_repository("schema/trace.schema.json", "trace_schema::bundled_traces_follow_the_schema")
    else {
        return;
    };
    let schema: J =
        serde_json::from_str(&std::fs::read_to_string(root().join("schema/trace.schema.json")).unwrap()).unwrap();
    let defs = schema["$defs"].clone();
    let mut lines = 0;
    for f in mooncake_trace::jsonl::expand(&[crate::here().join("traces")]).unwrap() {
        for l in mooncake_trace::jsonl::read(&f).unwrap() {
            valid(&schema, &defs, &l.value).unwrap_or_else(|e| panic!("{}:{}: {e}", f.display(), l.no));
            lines += 1;
        }
    }
    assert!(lines > 200);
    // The schema rejects what the parser rejects.
    for bad in [
        r#"{"seq": 1, "kind": "zmq", "side": "decoder", "conn": "d", "socket": "DEALER", "endpoint": "x", "bound": false, "dir": "send", "frames": ["zz"]}"#,
        r#"{"seq": 1, "kind": "zmq", "side": "router", "conn": "d", "socket": "DEALER", "endpoint": "x", "bound": false, "dir": "send", "frames": []}"#,
        r#"{"seq": 1, "kind": "http", "conn": "b", "dir": "request", "method": "GET"}"#,
        r#"{"format": "mooncake-trace", "format_version": 2, "vllm_version": "0.33.0", "connector": "c", "scenario": "s", "roles": {}}"#,
        r#"{"format": "mooncake-trace", "format_version": 1, "vllm_version": "0.33.0", "connector": "c", "scenario": "s", "roles": {}, "unobserved": ["memory"]}"#,
    ] {
        let v: J = serde_json::from_str(bad).unwrap();
        assert!(valid(&schema, &defs, &v).is_err(), "{bad}");
    }
}

/// Every line of every bundled trace (push and pull), read through the trace's serde types and written back
/// through the same types (`Header`, `Event::line_json`: what the tap writes with), is the file's line: the same
/// keys and values. Not the same bytes: the recorder writes Python's `", "` and `": "` separators, and its key order
/// moved between recorder versions (`t` and `socket_id`); the writer keeps one order.
#[test]
fn bundled_traces_write_back_as_they_read() {
    let dirs = [crate::here().join("traces"), crate::here().join("traces-pull")];
    let (mut files, mut events) = (0, 0);
    for f in mooncake_trace::jsonl::expand(&dirs).unwrap() {
        let trace = mooncake_trace::trace::Trace::load(&f).unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(trace.events.len() + 1, lines.len(), "{}", f.display());
        let header: J = serde_json::to_value(&trace.header).unwrap();
        assert_eq!(header, serde_json::from_str::<J>(lines[0]).unwrap(), "{}:1", f.display());
        for ev in &trace.events {
            let file: J = serde_json::from_str(lines[ev.line() - 1]).unwrap();
            let written: J = serde_json::from_str(&ev.line_json().unwrap()).unwrap();
            assert_eq!(written, file, "{}:{}", f.display(), ev.line());
            events += 1;
        }
        files += 1;
    }
    assert!(files >= 150 && events >= 1500, "only {files} traces, {events} events: the scan is broken");
    println!("{files} headers and {events} events of the bundled traces write back as they read");
}
