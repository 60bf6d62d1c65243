#!/usr/bin/env python3
"""The wire fingerprint (spec/README.md, "Wire fingerprint") computed from live msgspec classes.

Everything comes from msgspec.inspect.type_info (fields in order, encode names, types, required, defaults,
tag, tag_field, array_like, forbid_unknown_fields) plus StructConfig.omit_defaults, and from the enum classes'
members. The document is hashed like vLLM's hash_factors: sha256(json.dumps(doc, sort_keys=True)).

Usage:
  wire_fingerprint.py --spec                 stdin: one resolved spec revision (JSON) per line; builds the
                                             classes as tests/oracle/msgspec_oracle.py does and prints one
                                             {"revision", "fingerprint"} line each
  wire_fingerprint.py --pull                 the pull family: the message classes of every revision as
                                             tests/pull/gen_pull_vectors.py defines them (written from the facts,
                                             not from spec/); one {"revision", "fingerprint", "document"} line each
  wire_fingerprint.py --source FILE [--doc]  extracts only the msgspec.Struct and IntEnum class definitions
                                             (and the module-level type aliases they use) from a Python source
                                             file with `ast`, executes them, and prints their fingerprint
"""
import ast
import dataclasses
import enum
import importlib.util
import hashlib
import json
import os
import sys
import types
import typing

import msgspec
import msgspec.inspect as mi

FORMAT = "mooncake-wire-fingerprint/1"
STRUCTURAL = {"item_type", "key_type", "value_type", "item_types", "types", "cls"}


def type_text(t, names=None):
    """A msgspec.inspect type in the fingerprint's type grammar. `names` maps a class to its wire name when the
    Python class is named otherwise (the pull generator's `AgentMeta023` is `MooncakeAgentMetadata`)."""
    names = names or {}
    name = lambda cls: names.get(cls, cls.__name__)
    simple = {mi.IntType: "int", mi.StrType: "str", mi.BoolType: "bool", mi.FloatType: "float",
              mi.BytesType: "bytes", mi.NoneType: "None", mi.AnyType: "any"}
    if type(t) in simple:
        text = simple[type(t)]
    elif isinstance(t, mi.ListType):
        text = f"list[{type_text(t.item_type, names)}]"
    elif isinstance(t, mi.SetType):
        text = f"set[{type_text(t.item_type, names)}]"
    elif isinstance(t, mi.FrozenSetType):
        text = f"frozenset[{type_text(t.item_type, names)}]"
    elif isinstance(t, mi.VarTupleType):
        text = f"tuple[{type_text(t.item_type, names)}, ...]"
    elif isinstance(t, mi.TupleType):
        text = f"tuple[{', '.join(type_text(x, names) for x in t.item_types)}]"
    elif isinstance(t, mi.DictType):
        text = f"dict[{type_text(t.key_type, names)}, {type_text(t.value_type, names)}]"
    elif isinstance(t, mi.UnionType):
        others = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(others) == 1 and len(t.types) == 2:
            text = f"optional[{type_text(others[0], names)}]"
        else:
            text = f"union[{', '.join(type_text(x, names) for x in t.types)}]"
    elif isinstance(t, mi.EnumType):
        text = f"enum:{name(t.cls)}"
    elif isinstance(t, (mi.StructType, mi.DataclassType, mi.TypedDictType)):
        text = f"struct:{name(t.cls)}"
    else:
        text = f"unsupported:{type(t).__name__}"
    if isinstance(t, (mi.StructType, mi.DataclassType, mi.TypedDictType, mi.EnumType)):
        return text
    constraints = [f"{k}={getattr(t, k)!r}" for k in getattr(t, "__struct_fields__", ())
                   if k not in STRUCTURAL and getattr(t, k) is not None]
    return text + ("{" + ",".join(constraints) + "}" if constraints else "")


def tagged(v):
    """A default value as tagged JSON (conformance/vectors/GOLDEN.md), as src/hash/tagged.rs writes it."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, enum.Enum):
        return tagged(v.value)
    if isinstance(v, int):
        return v if -(2 ** 53) < v < 2 ** 53 else {"$int": str(v)}
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else {"$float": repr(v)}
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return {"$bytes": v.hex()}
    if isinstance(v, list):
        return [tagged(x) for x in v]
    if isinstance(v, tuple):
        return {"$tuple": [tagged(x) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {"$set": [tagged(x) for x in v]}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: tagged(x) for k, x in v.items()}
        return {"$dict_items": [[tagged(k), tagged(x)] for k, x in v.items()]}
    raise TypeError(f"default of unsupported type {type(v).__name__}")


def field_entries(fields, names):
    out = []
    for f in fields:
        entry = {"name": f.name, "encode_name": f.encode_name, "type": type_text(f.type, names), "required": f.required}
        if f.default is not msgspec.NODEFAULT:
            entry["default"] = tagged(f.default)
        elif f.default_factory is not msgspec.NODEFAULT:
            entry["default"] = tagged(f.default_factory())
        out.append(entry)
    return out


def document(classes, names=None):
    """The fingerprint document of msgspec Structs, enums, and (pull family) dataclasses and TypedDicts; any
    other object (a control tuple) has no entry. `names`: class -> wire name, when they differ."""
    names = names or {}
    structs, enums, dataclasses_ = {}, {}, {}
    for cls in classes:
        name = names.get(cls, getattr(cls, "__name__", None))
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
            info = mi.type_info(cls)
            structs[name] = {
                "omit_defaults": bool(cls.__struct_config__.omit_defaults),
                "array_like": info.array_like,
                "forbid_unknown_fields": info.forbid_unknown_fields,
                "tag_field": info.tag_field,
                "tag": info.tag,
                "fields": field_entries(info.fields, names),
            }
        elif isinstance(cls, type) and issubclass(cls, enum.Enum):
            kind = "IntEnum" if issubclass(cls, enum.IntEnum) else "Enum"
            enums[name] = {"kind": kind, "members": [[m.name, m.value] for m in cls]}
        elif dataclasses.is_dataclass(cls) or typing.is_typeddict(cls):
            info = mi.type_info(cls)
            fields = list(info.fields)
            if typing.is_typeddict(cls):
                # msgspec.inspect lists a TypedDict's keys in its own order; the fingerprint takes the class's
                # declaration order (a TypedDict value is written in the dict's order, not the class's).
                order = list(cls.__annotations__)
                fields.sort(key=lambda f: order.index(f.name))
            dataclasses_[name] = {"fields": field_entries(fields, names)}
    doc = {"format": FORMAT, "structs": structs, "enums": enums}
    # Only revisions with dataclass messages have this key (spec/README.md, "Wire fingerprint").
    if dataclasses_:
        doc["dataclasses"] = dataclasses_
    return doc


def fingerprint(classes, names=None):
    return hashlib.sha256(json.dumps(document(classes, names), sort_keys=True).encode()).hexdigest()


def is_wire_class(node):
    bases = [ast.unparse(b) for b in node.bases]
    return any(b in ("msgspec.Struct", "Struct", "IntEnum", "enum.IntEnum", "Enum", "enum.Enum") for b in bases)


def classes_from_source(path):
    """Only the Struct/IntEnum classes of a module, and the module-level aliases their annotations use."""
    tree = ast.parse(open(path).read())
    wanted = [n for n in tree.body if isinstance(n, ast.ClassDef) and is_wire_class(n)]
    names = {n.id for c in wanted for n in ast.walk(c) if isinstance(n, ast.Name)}
    aliases = []
    for n in tree.body:
        target = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else getattr(n, "target", None)
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and target.id in names and n.value is not None:
            aliases.append(n)
    body = [n for n in tree.body if n in aliases or n in wanted]
    module = types.ModuleType("extracted_" + os.path.basename(path).replace(".", "_"))
    module.__dict__.update({"msgspec": msgspec, "enum": enum, "IntEnum": enum.IntEnum, "Enum": enum.Enum,
                            "Struct": msgspec.Struct, "field": msgspec.field, "typing": typing,
                            "Optional": typing.Optional, "Union": typing.Union, "Any": typing.Any})
    sys.modules[module.__name__] = module
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), module.__dict__)
    return [module.__dict__[c.name] for c in wanted]


def main():
    if sys.argv[1:2] == ["--spec"]:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
        from msgspec_oracle import build
        for line in sys.stdin:
            rev = json.loads(line)
            classes = list(build(rev).values())
            print(json.dumps({"revision": rev["revision"], "fingerprint": fingerprint(classes), "document": document(classes)}), flush=True)
    elif sys.argv[1:2] == ["--pull"]:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pull", "gen_pull_vectors.py")
        spec = importlib.util.spec_from_file_location("gen_pull_vectors", path)
        gen = importlib.util.module_from_spec(spec)
        sys.modules["gen_pull_vectors"] = gen
        spec.loader.exec_module(gen)
        for revision, _releases, _commit, _source, _generation, messages in gen.REVISIONS:
            names = {cls: name for name, cls in messages.items() if isinstance(cls, type)}
            classes = list(messages.values())
            print(json.dumps({"revision": revision, "fingerprint": fingerprint(classes, names), "document": document(classes, names)}), flush=True)
    elif sys.argv[1:2] == ["--source"]:
        classes = classes_from_source(sys.argv[2])
        out = {"classes": [c.__name__ for c in classes], "fingerprint": fingerprint(classes)}
        if "--doc" in sys.argv:
            out["document"] = document(classes)
        print(json.dumps(out))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
