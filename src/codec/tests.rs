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
    let c = big_struct_codec(16, true, true);
    let v = c.decode("Big", &h("81a2663501")).unwrap();
    assert_eq!(c.encode("Big", &v).unwrap(), h("de0001a2663501"));
}

/// A spec of one msgspec struct `Big` with `n` fields `f0…`, each `int`, required unless `defaults` (then 0).
fn big_struct_codec(n: usize, defaults: bool, omit_defaults: bool) -> Codec {
    let mut fields = String::new();
    for i in 0..n {
        let default = if defaults { ", default = \"0\"" } else { "" };
        fields.push_str(&format!("  {{ name = \"f{i}\", type = \"int\"{default} }},\n"));
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
options = {{ omit_defaults = {omit_defaults} }}
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
    Codec::new(spec.revision("t").unwrap().clone()).unwrap()
}

/// A map of the fields `f{i}` = `i` for each `i` of `order`.
fn big_map(order: &[usize]) -> Vec<u8> {
    let mut w = crate::msgpack::Writer::new();
    w.map_len(order.len());
    for &i in order {
        w.str(&format!("f{i}"));
        w.uint(i as u64);
    }
    w.into_bytes()
}

#[test]
fn structs_of_more_than_64_fields_track_every_field() {
    // Past 64 fields the decoder's record of which fields it saw spills out of one word.
    let c = big_struct_codec(70, false, false);
    let all: Vec<usize> = (0..70).collect();
    let v = c.decode("Big", &big_map(&all)).unwrap();
    assert_eq!(v.field("f69").unwrap().as_int().unwrap().as_u64(), Some(69));
    // Out of order (the last field first) and complete.
    let rev: Vec<usize> = (0..70).rev().collect();
    assert_eq!(c.decode("Big", &big_map(&rev)).unwrap(), v);
    // One required field missing, on either side of the 64th: msgspec names the first in declaration order.
    for missing in [3, 63, 64, 66, 69] {
        let some: Vec<usize> = (0..70).filter(|&i| i != missing && i != 68).collect();
        let e = c.decode("Big", &big_map(&some)).unwrap_err().msgspec_message();
        let first = missing.min(68);
        assert_eq!(e, format!("Object missing required field `f{first}`"), "without f{missing} and f68");
    }
    // With defaults, any subset decodes, the rest at 0.
    let c = big_struct_codec(70, true, false);
    let v = c.decode("Big", &big_map(&[66, 2])).unwrap();
    assert_eq!(v.field("f66").unwrap().as_int().unwrap().as_u64(), Some(66));
    assert_eq!(v.field("f65").unwrap().as_int().unwrap().as_u64(), Some(0));
}

#[test]
fn packed_and_general_lists_are_the_same_value() {
    let c = Codec::builtin("vllm-0.33.0").unwrap();
    // ok_reqs = ["d-req-1", "x"]: decoded as one StrList.
    let bytes = h("82a673746174757300a76f6b5f7265717392a7642d7265712d31a178");
    let v = c.decode("MooncakeXferResponse", &bytes).unwrap();
    let ok = v.field("ok_reqs").unwrap();
    assert_eq!(ok.as_str_list().unwrap(), &vec!["d-req-1", "x"]);
    // The same list as a general list of strs: equal either way round, encoded to the same bytes.
    let mut general = v.clone();
    *s_field(&mut general, "ok_reqs") = Value::List(vec![Value::from("d-req-1"), Value::from("x")]);
    assert_eq!(general, v);
    assert_eq!(v, general);
    assert_eq!(c.encode("MooncakeXferResponse", &general).unwrap(), bytes);
    // A different element is a different value.
    *s_field(&mut general, "ok_reqs") = Value::List(vec![Value::from("d-req-1"), Value::from("y")]);
    assert_ne!(general, v);
    // Ints: block ids of the reference request decode packed; the general form encodes alike.
    let md = "89af72656d6f74655f686f73746e616d65a831302e302e302e32ab72656d6f74655f706f7274cd3a98ae72656d6f74655f74705f73697a6501ae72656d6f74655f74705f72616e6b00aa7265715f626c6f636b7381a7642d7265712d3192a6786665722d3191920304b36b765f6361636865735f626173655f6164647290aa626c6f636b5f6c656e7390ad6b765f626c6f636b5f6c656e7390a96c61796f75745f6964cf0123456789abcdef";
    let v = c.decode("MooncakeXferMetadata", &h(md)).unwrap();
    let blocks = &v.field("req_blocks").unwrap().as_dict().unwrap()[0].1;
    let groups = blocks.as_seq().unwrap()[1].as_seq().unwrap();
    let ints = groups[0].as_int_list().unwrap().to_vec();
    assert_eq!(ints.iter().map(|i| i.as_u64().unwrap()).collect::<Vec<_>>(), [3, 4]);
    let general_ints = Value::List(ints.iter().map(|i| Value::Int(*i)).collect());
    assert_eq!(general_ints, groups[0]);
    let st = c.message_struct("MooncakeXferMetadata").unwrap();
    let list_ty = st.fields.iter().find(|f| f.name == "block_lens").unwrap().ty;
    let packed = Value::from(ints.clone());
    assert_eq!(c.encode_type(list_ty, &packed).unwrap(), c.encode_type(list_ty, &general_ints).unwrap());
    // Empty lists of any form are equal.
    assert_eq!(Value::IntList(vec![]), Value::StrList(StrList::new()));
    assert_eq!(Value::List(vec![]), Value::IntList(vec![]));
}

fn s_field<'a>(v: &'a mut Value, name: &str) -> &'a mut Value {
    let Value::Struct(s) = v else { panic!("a struct") };
    s.get_mut(name).unwrap()
}

#[test]
fn a_conversion_error_says_which_kind() {
    use super::convert::{convert, ConvertError, Lacking};
    let (c33, c32) = (Codec::builtin("vllm-0.33.0").unwrap(), Codec::builtin("vllm-0.32.0").unwrap());
    let reply = |status: u8, layout_id: u8| {
        c33.decode(
            "MooncakeXferResponse",
            &[
                0x82, 0xa6, b's', b't', b'a', b't', b'u', b's', status, 0xa9, b'l', b'a', b'y', b'o', b'u', b't', b'_',
                b'i', b'd', layout_id,
            ],
        )
        .unwrap()
    };
    // 0.32.0 has no layout_id: a nonzero one cannot be sent, a zero one is dropped.
    assert_eq!(
        convert(&c33, &c32, "MooncakeXferResponse", &reply(0, 5), Lacking::MustBeDefault).unwrap_err(),
        ConvertError::Lacking { field: "layout_id".into(), value: "5".into() }
    );
    assert!(convert(&c33, &c32, "MooncakeXferResponse", &reply(0, 0), Lacking::MustBeDefault).is_ok());
    // LAYOUT_MISS (3) is no member of 0.32.0's status enum: the error is about the field `status`.
    let e = convert(&c33, &c32, "MooncakeXferResponse", &reply(3, 0), Lacking::MustBeDefault).unwrap_err();
    assert!(matches!(&e, ConvertError::InField { field, .. } if field == "status"), "{e:?}");
    assert!(matches!(e.innermost(), ConvertError::NotAMember { value, .. } if value == "3"), "{e:?}");
    assert_eq!(
        convert(&c33, &c32, "NoSuchMessage", &reply(0, 0), Lacking::Drop).unwrap_err(),
        ConvertError::NoMessage { revision: "vllm-0.33.0".into(), message: "NoSuchMessage".into() }
    );
}
