//! Store keys round-trip through their grammars for every vLLM release and every other family: a key built
//! from random parts parses back to exactly those parts when the free-text parts are given as hints, and
//! without hints the parser either returns those parts or reports the key ambiguous with those parts among
//! its readings — never a different single reading.

use mooncake_wire::codec::testgen::Rng;
use mooncake_wire::keys::grammar::{Fields, KeyParseError};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::typed::{
    AscendMooncakeKey, AscendMooncakeLayerKey, AscendStoreKey, AscendStoreLayerKey, LmcacheKey, LmcacheLayerKey,
    TypedKey,
};
use mooncake_wire::keys::vllm_key::{KeyError, KeyHints, VllmStoreKey};

const TEXT: &[&str] = &["", "Qwen2.5-7B-Instruct", "m@odd", "名前", "a@b@c", "@", "x:1@tp_rank:2", "teamA", "ns/é"];
const NAMESPACES: &[&str] = &[
    "",
    "@store_tp:4@store_pp:1@store_format:tp_shared_lbhnc",
    "@store_tp:8@store_pp:2@store_format:tp_shared_lbnhc",
    "@store_pp:2@store_format:tp_shared_mqa",
    "@store_pp:1@store_format:rank_local_tp2_layout_BLNHC",
];
/// vLLM 0.34.0's namespaces (per-group TP-shared forms with a schema fingerprint; the fallback stays).
const NAMESPACES_034: &[&str] = &[
    "",
    "@store_tp:4@store_pp:1@store_format:attention_head_major@store_schema:fa50aba996124fc5",
    "@store_tp:8@store_pp:2@store_format:attention_token_major@store_schema:0123456789abcdef",
    "@store_tp:2@store_pp:1@store_format:mamba_state@store_schema:ffffffffffffffff",
    "@store_pp:1@store_format:rank_local_tp2_layout_BLNHC",
];

fn namespaces(release: &str) -> &'static [&'static str] {
    if release == "0.34.0" {
        NAMESPACES_034
    } else {
        NAMESPACES
    }
}

#[test]
fn each_release_takes_only_its_own_namespaces() {
    let k = |ns: &str| VllmStoreKey {
        model_name: "m".into(),
        store_namespace: ns.into(),
        chunk_hash: "ab".into(),
        ..Default::default()
    };
    for ns in &NAMESPACES[1..4] {
        assert!(k(ns).build("0.33.0").is_ok(), "{ns}");
        assert!(k(ns).build("0.34.0").is_err(), "0.34.0 has no {ns}");
    }
    for ns in &NAMESPACES_034[1..4] {
        assert!(k(ns).build("0.34.0").is_ok(), "{ns}");
        assert!(k(ns).build("0.33.0").is_err(), "0.33.0 has no {ns}");
    }
    for bad in [
        "@store_tp:4@store_pp:1@store_format:attention_head_major@store_schema:0123456789abcde",
        "@store_tp:4@store_pp:1@store_format:attention_head_major@store_schema:0123456789ABCDEF",
        "@store_tp:4@store_pp:1@store_format:attention_head_major",
    ] {
        assert!(k(bad).build("0.34.0").is_err(), "{bad}");
    }
}

fn hash(rng: &mut Rng) -> String {
    let n = [16, 32, 64][rng.below(3)];
    (0..n).map(|_| char::from(b"0123456789abcdef"[rng.below(16)])).collect()
}

fn rank(rng: &mut Rng) -> i64 {
    if rng.chance(5) {
        -(rng.below(3) as i64) - 1
    } else {
        rng.below(20) as i64
    }
}

#[test]
fn vllm_keys_round_trip_in_every_release() {
    let spec = StoreKeySpec::builtin();
    let mut rng = Rng::new(21);
    let (mut unique, mut ambiguous) = (0, 0);
    for release in spec.vllm_releases() {
        let g = spec.vllm_grammar(release).unwrap();
        let has = |f: &str| {
            g.parts.iter().any(|p| matches!(p, mooncake_wire::keys::grammar::Part::Field { name, .. } if name == f))
        };
        for _ in 0..300 {
            let k = VllmStoreKey {
                cache_prefix: if has("cache_prefix") { rng.pick(TEXT).to_string() } else { String::new() },
                model_name: rng.pick(TEXT).to_string(),
                store_namespace: if has("store_namespace") {
                    rng.pick(namespaces(release)).to_string()
                } else {
                    String::new()
                },
                tp_rank: rank(&mut rng),
                pcp_rank: rank(&mut rng),
                dcp_rank: rank(&mut rng),
                pp_rank: rank(&mut rng),
                group_id: if has("group_id") { rank(&mut rng) } else { 0 },
                chunk_hash: hash(&mut rng),
            };
            let key = k.build(release).unwrap();
            let hints = KeyHints { cache_prefix: Some(k.cache_prefix.clone()), model_name: Some(k.model_name.clone()) };
            assert_eq!(VllmStoreKey::parse(&key, release, &hints).unwrap(), k, "{release} {key}");
            match VllmStoreKey::parse(&key, release, &KeyHints::default()) {
                Ok(p) => {
                    assert_eq!(p, k, "{release}: a single reading must be the right one: {key}");
                    unique += 1;
                }
                Err(KeyError::Parse(KeyParseError::Ambiguous { readings, .. })) => {
                    assert!(readings.iter().any(|r| VllmStoreKey::from_fields(r) == k), "{release}: {key}");
                    ambiguous += 1;
                }
                Err(e) => panic!("{release} {key}: {e}"),
            }
        }
    }
    println!("{unique} keys parsed without hints, {ambiguous} needed hints");
    assert!(unique > 500 && ambiguous > 100);
}

fn check<K: TypedKey + PartialEq + std::fmt::Debug>(k: K, hints: &[&str]) -> bool {
    let key = k.build().unwrap();
    let f = k.to_fields();
    let h: Fields = hints.iter().map(|n| (n.to_string(), f[*n].clone())).collect();
    assert_eq!(K::parse(&key, &h).unwrap(), k, "{key}");
    match K::parse(&key, &Fields::new()) {
        Ok(p) => {
            assert_eq!(p, k, "{key}");
            true
        }
        Err(KeyError::Parse(KeyParseError::Ambiguous { readings, .. })) => {
            assert!(readings.iter().any(|r| K::from_fields(r) == k), "{key}");
            false
        }
        Err(e) => panic!("{key}: {e}"),
    }
}

#[test]
fn other_families_round_trip() {
    let mut rng = Rng::new(22);
    let words = ["kv", "state", "default", "c4", "mixed", "", "a:b"];
    let dtypes = ["half", "bfloat16", "float", "fp8_e4m3fn", "int8"];
    let mut unique = 0;
    for _ in 0..400 {
        let model = rng.pick(TEXT).to_string();
        unique += check(
            AscendMooncakeKey {
                model_name: model.clone(),
                world_size: rank(&mut rng),
                worker_id: rank(&mut rng),
                chunk_hash: hash(&mut rng),
            },
            &["model_name"],
        ) as usize;
        check(
            AscendMooncakeLayerKey {
                model_name: model.clone(),
                world_size: rank(&mut rng),
                worker_id: rank(&mut rng),
                chunk_hash: hash(&mut rng),
                layer_id: rank(&mut rng),
            },
            &["model_name"],
        );
        check(
            AscendStoreKey {
                model_name: model.clone(),
                pcp_rank: rank(&mut rng),
                dcp_rank: rank(&mut rng),
                head_or_tp_rank: rank(&mut rng),
                pp_rank: rank(&mut rng),
                kv_cache_group_id: rank(&mut rng),
                cache_role: rng.pick(&words).to_string(),
                cache_family: rng.pick(&words).to_string(),
                chunk_hash: hash(&mut rng),
            },
            &["model_name"],
        );
        check(
            AscendStoreLayerKey {
                model_name: model.clone(),
                pcp_rank: rank(&mut rng),
                dcp_rank: rank(&mut rng),
                head_or_tp_rank: rank(&mut rng),
                kv_cache_group_id: rank(&mut rng),
                cache_role: rng.pick(&words).to_string(),
                cache_family: rng.pick(&words).to_string(),
                layer_id: rank(&mut rng),
                chunk_hash: hash(&mut rng),
            },
            &["model_name"],
        );
        let tags: Vec<(String, String)> =
            (0..rng.below(3)).map(|i| (format!("t{i}"), ["v", "a%b", "", "x:y"][rng.below(4)].to_string())).collect();
        let signed = if rng.chance(20) { format!("-{}", hash(&mut rng)) } else { hash(&mut rng) };
        check(
            LmcacheKey {
                model_name: model.clone(),
                world_size: rank(&mut rng),
                worker_id: rank(&mut rng),
                chunk_hash: signed.clone(),
                dtype: rng.pick(&dtypes).to_string(),
                tags: tags.clone(),
            },
            &["model_name"],
        );
        check(
            LmcacheLayerKey {
                model_name: model,
                world_size: rank(&mut rng),
                worker_id: rank(&mut rng),
                chunk_hash: signed,
                dtype: rng.pick(&dtypes).to_string(),
                layer_id: rank(&mut rng),
                tags,
            },
            &["model_name"],
        );
    }
    assert!(unique > 100);
}

#[test]
fn a_key_of_one_release_is_not_read_as_another_shape() {
    let k = VllmStoreKey { model_name: "m".into(), group_id: 1, chunk_hash: "ab".into(), ..Default::default() };
    let key_022 = k.build("0.22.0").unwrap();
    // 0.21.0 has no group part: the same text is not a 0.21 key with a different reading.
    let r = VllmStoreKey::parse(&key_022, "0.21.0", &KeyHints::default());
    assert!(r.is_err() || r.unwrap().model_name != "m", "0.22 key read as a 0.21 key with model m");
    // A 0.21 key (no group part) is not a 0.22 key.
    let k0 = VllmStoreKey { group_id: 0, ..k };
    assert!(matches!(
        VllmStoreKey::parse(&k0.build("0.21.0").unwrap(), "0.22.0", &KeyHints::default()),
        Err(KeyError::Parse(KeyParseError::NoMatch { .. }))
    ));
}
