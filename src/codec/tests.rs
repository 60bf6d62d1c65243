//! Reference encodings from vLLM 0.33.0's own classes (msgspec 0.23.0), `spec/PROTOCOL.md#reference-encodings`.

use super::*;

fn h(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn round_trip(message: &str, hex: &str) -> Value {
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    let v = c.decode(message, &h(hex)).unwrap_or_else(|e| panic!("{hex}: {e}"));
    let back = c.encode(message, &v).unwrap();
    assert_eq!(back, h(hex), "re-encoding of {v}");
    v
}

#[test]
fn reference_responses() {
    let v = round_trip("MooncakeXferResponse", "82a673746174757300a76f6b5f7265717391a7642d7265712d31");
    assert_eq!(
        v.to_string(),
        "MooncakeXferResponse(status=FINISH, ok_reqs=[\"d-req-1\"], err_reqs=None, err_msg=None, layout_id=0)"
    );
    round_trip(
        "MooncakeXferResponse",
        "83a673746174757300a76f6b5f7265717391a7642d7265712d31a96c61796f75745f6964cf1234567890abcdef",
    );
    round_trip("MooncakeXferResponse", "81a673746174757301");
    round_trip("MooncakeXferResponse", "82a673746174757302a76572725f6d7367a4626f6f6d");
    round_trip("MooncakeXferResponse", "82a673746174757303a76572725f6d7367a178");
}

#[test]
fn reference_requests() {
    let v = round_trip("MooncakeXferMetadata", "89af72656d6f74655f686f73746e616d65a831302e302e302e32ab72656d6f74655f706f7274cd3a98ae72656d6f74655f74705f73697a6501ae72656d6f74655f74705f72616e6b00aa7265715f626c6f636b7381a7642d7265712d3192a6786665722d3191920304b36b765f6361636865735f626173655f6164647290aa626c6f636b5f6c656e7390ad6b765f626c6f636b5f6c656e7390a96c61796f75745f6964cf0123456789abcdef");
    assert_eq!(v.field("layout_id").unwrap().as_int().unwrap().as_u64(), Some(0x0123456789abcdef));
    round_trip("MooncakeXferMetadata", "8eaf72656d6f74655f686f73746e616d65a831302e302e302e32ab72656d6f74655f706f7274cd3a98ae72656d6f74655f74705f73697a6501ae72656d6f74655f74705f72616e6b00aa7265715f626c6f636b7381a7642d7265712d3192a6786665722d3191920304b36b765f6361636865735f626173655f6164647291cf00007f0000000000aa626c6f636b5f6c656e7391cd0800ad6b765f626c6f636b5f6c656e7391cd0800b6726567697374657265645f6c617965725f6e616d657391b86d6f64656c2e6c61796572732e302e73656c665f6174746eb8726567697374657265645f6c617965725f696e64696365739100b8726567697374657265645f67726f75705f696e64696365739100bb726567697374657265645f7368617265645f67726f75705f696473919100b6726567697374657265645f726f775f6f6666736574739100a96c61796f75745f6964cf0123456789abcdef");
}

fn err(rev: &str, message: &str, hex: &str) -> String {
    Codec::builtin(rev).unwrap().decode(message, &h(hex)).unwrap_err().msgspec_message()
}

#[test]
fn errors_read_like_msgspec() {
    let r = "vllm-0.33.0";
    let m = "MooncakeXferResponse";
    assert_eq!(err(r, m, ""), "Input data was truncated");
    assert_eq!(err(r, m, "9100"), "Expected `object`, got `array`");
    assert_eq!(err(r, m, "81a6737461747573c3"), "Expected `int`, got `bool` - at `$.status`");
    assert_eq!(err(r, m, "81a673746174757304"), "Invalid enum value 4 - at `$.status`");
    assert_eq!(err("vllm-0.32.0", m, "81a673746174757303"), "Invalid enum value 3 - at `$.status`");
    assert_eq!(err(r, m, "80"), "Object missing required field `status`");
    assert_eq!(
        err(r, m, "82a673746174757300a76f6b5f7265717301"),
        "Expected `array | null`, got `int` - at `$.ok_reqs`"
    );
    assert_eq!(err(r, m, "81c0"), "Expected `str`, got `null` - at `key` in `$`");
    assert_eq!(err(r, m, "81a673746174757300c0"), "MessagePack data is malformed: trailing characters (byte 9)");
    assert_eq!(err(r, m, "81a6737461747573c1"), "MessagePack data is malformed: invalid opcode '\\xc1' (byte 8)");
    let md = "MooncakeXferMetadata";
    // req_blocks values are 2-tuples; their second element is per-group lists from 0.20.0 on.
    let base = "85af72656d6f74655f686f73746e616d65a161ab72656d6f74655f706f727401ae72656d6f74655f74705f73697a6501ae72656d6f74655f74705f72616e6b00aa7265715f626c6f636b7381a172";
    assert_eq!(
        err("vllm-0.20.0..0.23.0", md, &format!("{base}92a1789101")),
        "Expected `array`, got `int` - at `$.req_blocks[...][1][0]`"
    );
    assert_eq!(
        err("vllm-0.16.0..0.18.1", md, &format!("{base}92a178919101")),
        "Expected `int`, got `array` - at `$.req_blocks[...][1][0]`"
    );
    assert_eq!(
        err(r, md, &format!("{base}93a1789001")),
        "Expected `array` of length 2, got 3 - at `$.req_blocks[...]`"
    );
    assert_eq!(err(r, md, "81a1ff01"), "Object missing required field `remote_hostname`");
}

#[test]
fn duplicate_keys_last_wins_first_position_stays() {
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    // {status: 0, ok_reqs: ["a"], status: 1}
    let v =
        c.decode("MooncakeXferResponse", &h("83a673746174757300a76f6b5f726571739161a1a673746174757301")).unwrap_err();
    assert_eq!(v.msgspec_message(), "Expected `str`, got `int` - at `$.ok_reqs[0]`");
    let v = c.decode("MooncakeXferResponse", &h("83a673746174757300a76f6b5f7265717391a161a673746174757301")).unwrap();
    assert_eq!(v.field("status").unwrap().to_string(), "CONTINUE");
}

#[test]
fn sixteen_declared_fields_switch_to_map16() {
    // A spec with a 16-field struct, 15 fields at their defaults: msgspec writes `de 00 01`.
    let mut fields = String::new();
    for i in 0..16 {
        fields.push_str(&format!("  {{ name = \"f{i}\", type = \"int\", default = \"0\" }},\n"));
    }
    let text = format!(
        r#"format = "mooncake-wire-spec/2"
family = "test"
revision = "t"
generation = 2
releases = ["1.0"]
source = "test"
summary = "test"
[structs.Big]
kind = "msgspec.Struct"
options = {{ omit_defaults = true }}
fields = [
{fields}]
[transport]
kind = "zmq"
pattern = "x"
source = "x"
sockets = {{ a = {{ type = "DEALER", binds = false, address = "x" }} }}
messages = [ {{ name = "Big", from = "a", to = "a", encoding = "msgpack", frames_sent = ["payload"], frames_received = ["payload"] }} ]
"#
    );
    let spec = crate::spec::Spec::from_files([("t.toml".to_string(), text)]).unwrap();
    let c = Codec::new(spec.revision("t").unwrap().clone()).unwrap();
    let v = c.decode("Big", &h("81a2663501")).unwrap();
    assert_eq!(c.encode("Big", &v).unwrap(), h("de0001a2663501"));
}
