#!/usr/bin/env python3
"""Generates the msgspec vectors of one vLLM wire revision from the message classes of the release's own wheel:
OUT/<revision>/<Message>.jsonl, and that revision's row of OUT/revisions.json.

    gen_vectors.py --release X [--seed N] [--out DIR] [--profile full|compact] [--table FILE] [--no-download]

The release is looked up in the revision table (--table, default conformance/vectors/revisions.json): a release of
a listed revision regenerates that revision, with the structs of its first release (the one the files name as
their source); every cached wheel of the revision's other releases is checked to define the same classes. A release
that no row lists becomes a revision of its own, `vllm-<release>`.

The format is conformance/vectors/README.md's. Generation is deterministic for a seed and a msgspec version: one
random.Random(seed) per message file, drawn in a fixed order (randval.py).
"""
import argparse
import hashlib
import json
import os
import random
import sys

import msgspec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
import heartbeat  # noqa: E402
import randval  # noqa: E402
import shapes  # noqa: E402
import wheel  # noqa: E402

sys.setrecursionlimit(1000)  # the nesting limit the reject cases record comes from the recursion limit

DEFAULT_SEED = 20261129
GEN1_MESSAGES = ["MooncakeAgentMetadata"]
GEN2_MESSAGES = ["MooncakeXferMetadata", "MooncakeXferResponse"]
# Messages later generation-2 releases added, written when the release defines them (in this order, after the two
# above): the lease heartbeat of 0.34.0, which shares the prefiller's ROUTER with the pull.
LATER_GEN2_MESSAGES = ["MooncakeLeaseHeartbeat"]
# The revisions whose bundled files use the full profile (see cases.Profile); every other listed revision uses
# the compact one. A revision that is not in the table yet (a new release) gets the full profile.
FULL_PROFILE_REVISIONS = {"vllm-0.33.0", "vllm-0.34.0"}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUNDLED = os.path.join(REPO, "conformance", "vectors")


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def value_json(obj):
    return {f: msgspec.to_builtins(getattr(obj, f)) for f in obj.__struct_fields__}


def record(cls, cid, data):
    """The case line: what msgspec.msgpack.Decoder(cls) does with `data`."""
    try:
        obj = msgspec.msgpack.Decoder(cls).decode(data)
    except msgspec.ValidationError as e:
        return {"id": cid, "expect": "reject", "hex": data.hex(), "error": str(e), "error_type": "ValidationError"}
    except msgspec.DecodeError as e:
        return {"id": cid, "expect": "reject", "hex": data.hex(), "error": str(e), "error_type": "DecodeError"}
    except RecursionError as e:
        return {"id": cid, "expect": "reject", "hex": data.hex(), "error": str(e), "error_type": "RecursionError"}
    return {"id": cid, "expect": "accept", "hex": data.hex(), "value": value_json(obj),
            "canonical_hex": msgspec.msgpack.encode(obj).hex()}


def message_cases(cls, seed, mod=None, route=None):
    """Every case of one message (the full set, in file order, as dicts). The lease heartbeat (`route` given)
    also gets the `classify-*` cases, and every case the prefiller's routing of its bytes (heartbeat.py)."""
    fs = shapes.fields(cls)
    rng = random.Random(seed)
    out, valid_values = [], []
    for i in range(1, cases.VALID_COUNT + 1):
        obj = randval.rand_struct(cls, rng)
        out.append(record(cls, "valid-%04d" % i, msgspec.msgpack.encode(obj)))
        valid_values.append(obj)
    for cid, data in cases.edge_cases(cls, fs):
        out.append(record(cls, cid, data))
    bases, trunc_base = cases.noncanon_bases(cls, fs, valid_values)
    for n, base in enumerate(bases, start=1):
        for cid, data in cases.noncanon_cases(base, fs, "%02d" % n):
            out.append(record(cls, cid, data))
    for cid, data in cases.reject_cases(cls, fs, trunc_base):
        out.append(record(cls, cid, data))
    if route is not None:
        for cid, data in heartbeat.classification_cases(mod):
            out.append(record(cls, cid, data))
        for c in out:
            c["route"] = route(bytes.fromhex(c["hex"]))
    return out


def counts(case_list):
    accept = sum(c["expect"] == "accept" for c in case_list)
    noncanon = sum(c["expect"] == "accept" and c["id"].startswith("noncanon-") for c in case_list)
    return {"total": len(case_list), "accept": accept, "noncanon_accept": noncanon, "reject": len(case_list) - accept}


def wire_digest(classes):
    """12 hex digits of the sha256 of the classes' msgspec JSON schema (field names, types, defaults, enum
    values): equal for releases whose messages msgspec encodes and decodes alike."""
    _, components = msgspec.json.schema_components(classes)
    return hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()[:12]


def version_key(release):
    return tuple(int(p) if p.isdigit() else p for p in release.replace("-", ".").split("."))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", required=True, help="a vLLM release, e.g. 0.33.0")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", default=BUNDLED, help="vectors directory (default: the bundled conformance/vectors)")
    ap.add_argument("--profile", choices=["full", "compact"], help="default: the one the revision's bundled files use")
    ap.add_argument("--table", help="revision table to read the release ranges from (default: OUT/revisions.json, "
                                    "else the bundled one)")
    ap.add_argument("--no-download", action="store_true", help="use cached wheels only")
    ap.add_argument("--pip-python", help="interpreter whose pip downloads missing wheels (default: this one)")
    a = ap.parse_args(argv)

    out_table = os.path.join(a.out, "revisions.json")
    table_path = a.table or (out_table if os.path.exists(out_table) else os.path.join(BUNDLED, "revisions.json"))
    table = json.load(open(table_path, encoding="utf-8"))
    row = next((r for r in table["revisions"] if a.release in r["releases"]), None)
    revision = row["revision"] if row else f"vllm-{a.release}"
    releases = row["releases"] if row else [a.release]
    first = releases[0]
    dl = dict(download=not a.no_download, python=a.pip_python)

    mod, connector, commit, code = wheel.load_release(first, **dl)
    build_commits, same = {first: commit}, [first]
    for rel in releases[1:]:
        try:
            path = wheel.find_wheel(rel, **dl) if rel == a.release else wheel.find_wheel(rel, download=False)
        except SystemExit:
            continue  # not cached: the table's build commit stays
        p2, src2, c2 = wheel.read_connector(path)
        if wheel.extract(src2) != code:
            raise SystemExit(f"vLLM {rel}'s message classes differ from {first}'s: {revision} is not one wire "
                             f"revision any more (split it in {table_path})")
        build_commits[rel] = c2
        same.append(rel)
    print(f"{revision}: classes from the vLLM {first} wheel ({connector}); identical in {', '.join(same)}", file=sys.stderr)

    profile = cases.Profile(a.profile or ("full" if revision in FULL_PROFILE_REVISIONS or row is None else "compact"))
    if hasattr(mod, "MooncakeAgentMetadata"):
        messages = GEN1_MESSAGES
    else:
        messages = GEN2_MESSAGES + [m for m in LATER_GEN2_MESSAGES if hasattr(mod, m)]
    os.makedirs(os.path.join(a.out, revision), exist_ok=True)
    msg_counts = {}
    for name in messages:
        cls = getattr(mod, name)
        header = {"format": "mooncake-vectors", "format_version": 1, "revision": revision, "vllm_releases": releases,
                  "message": name, "source": f"vLLM {first} wheel, {connector}", "msgspec_version": msgspec.__version__,
                  "seed": a.seed}
        route = None
        if name == heartbeat.HEARTBEAT:
            route = heartbeat.router(wheel.read_connector(wheel.find_wheel(first, download=False))[1], cls)
        case_list = message_cases(cls, a.seed, mod, route)
        msg_counts[name] = counts(case_list)  # the table counts the full set, whatever the file keeps
        kept = [c for c in case_list if profile.keeps(c, dumps)]
        path = os.path.join(a.out, revision, name + ".jsonl")
        with open(path, "w", encoding="utf-8", newline="") as f:
            for obj in [header] + kept:
                f.write(dumps(obj) + "\n")
        print(f"  {path}: {len(kept)} of {len(case_list)} cases ({profile.name} profile, seed {a.seed})", file=sys.stderr)

    # The revision's row of the table (written to OUT/revisions.json; the other rows are kept).
    old = row or {}
    new_row = {
        "revision": revision,
        "generation": 1 if messages == GEN1_MESSAGES else 2,
        "releases": releases,
        "build_commits": {rel: build_commits.get(rel) or old.get("build_commits", {}).get(rel) for rel in releases},
        # A row already in the table keeps its digest (the bundled ones come from the original generator, whose
        # recipe is not known); a new row gets wire_digest()'s.
        "wire_hash": old.get("wire_hash") or wire_digest([getattr(mod, m) for m in messages]),
        "connector": connector,
        "messages": msg_counts,
    }
    out = json.load(open(out_table, encoding="utf-8")) if os.path.exists(out_table) else dict(table)
    out["msgspec_version"] = msgspec.__version__
    out["seed"] = a.seed
    rows = [r for r in out["revisions"] if r["revision"] != revision]
    rows.append(new_row)
    order = {r["revision"]: i for i, r in enumerate(out["revisions"])}
    rows.sort(key=lambda r: (order.get(r["revision"], len(order)), version_key(r["releases"][0])))
    out["revisions"] = rows
    with open(out_table, "w", encoding="utf-8") as f:
        f.write(json.dumps(out, indent=1) + "\n")
    print(f"  {out_table}: row {revision}", file=sys.stderr)


if __name__ == "__main__":
    main()
