#!/usr/bin/env python3
"""Reads the wire facts of vLLM's MooncakeConnector out of its source, statically, and prints them as JSON.

Standard library only; nothing of vLLM (or torch) is imported: every file is parsed with `ast`. `mooncake-
conformance extract` embeds this script, runs it with `python3 - PATH` and turns the JSON into a spec revision
(edits on the closest bundled revision); it can be run on its own as well:

    python3 conformance/extract/extract.py PATH

PATH is a vLLM source checkout (the directory holding `vllm/`), the connector's package folder
(`.../kv_connector/v1/mooncake/`), a single Python file, or a wheel (`vllm-X-*.whl`, read as a zip).

What it reads (output keys):
  structs     every class deriving from msgspec.Struct (directly or through another one of the package):
              fields in declaration order (inherited ones first), annotations in the spec's type language,
              defaults (literals, msgspec.field(default=..., default_factory=list|dict)), class keywords
              (omit_defaults, array_like, forbid_unknown_fields, tag, tag_field, rename, dict, frozen, kw_only)
  enums       every IntEnum a struct field refers to (through aliases too), members in definition order
  aliases     module-level `Name = <type>` (and `Name: TypeAlias = ...`) the structs and models use; an alias
              imported from another vLLM module is followed into that module when the tree holds it
  bootstrap   the FastAPI bootstrap server: routes (method, path, request model, responses with status and
              HTTPException detail templates), the pydantic / dataclass models they use, and how a second
              registration of a taken slot is answered (`duplicate_registration`)
  not_derived everything met that cannot be read statically, one sentence each — never a guess
Exit codes: 0 read; 2 PATH is not a vLLM Mooncake source (the message says why).
"""
import ast
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tokenize
import zipfile

FORMAT = "mooncake-extract/1"
# Where each generation keeps the connector (tools/vectors/wheel.py reads the same paths).
PACKAGE_DIR = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake"  # generation 2 (0.16.0 on): a package
GEN1_FILE = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake_connector.py"  # generation 1 (0.13.0 - 0.15.1)
CONNECTOR_PATHS = [PACKAGE_DIR + "/mooncake_connector.py", GEN1_FILE]
VERSION_FILE = "vllm/_version.py"
SCALARS = {"int": "int", "str": "str", "bool": "bool", "float": "float", "bytes": "bytes", "Any": "any"}
LISTS = {"list", "List", "Sequence", "typing.List"}
DICTS = {"dict", "Dict", "Mapping", "typing.Dict"}
TUPLES = {"tuple", "Tuple", "typing.Tuple"}
STRUCT_KWARGS = ["omit_defaults", "array_like", "forbid_unknown_fields", "tag", "tag_field", "rename", "dict", "frozen"]


# One source file read is at most this many bytes, and one run reads at most MAX_TOTAL_BYTES in all (a wheel's
# members are checked by their declared size before they are inflated). vLLM's connector files are under 200 KB.
MAX_SOURCE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 64 << 20


class Usage(Exception):
    pass


# ---------------------------------------------------------------------------------------------------- inputs
class Tree:
    """Files of a vLLM tree (a checkout or a wheel), by path relative to the directory holding `vllm/`."""

    def __init__(self, root=None, zf=None):
        self.root, self.zf = root, zf
        self.names = set(zf.namelist()) if zf else None
        self.read_bytes = 0

    def read(self, rel):
        if self.zf is not None:
            if rel not in self.names:
                return None
            size = self.zf.getinfo(rel).file_size
            self.count(rel, size)
            return decode_source(rel, self.zf.read(rel))
        p = os.path.join(self.root, rel)
        if not os.path.isfile(p):
            return None
        return decode_source(rel, read_capped(p, self))

    def count(self, display, size):
        if size > MAX_SOURCE_BYTES:
            raise Usage(f"{display}: {size} bytes, over the {MAX_SOURCE_BYTES}-byte cap on one source file")
        self.read_bytes += size
        if self.read_bytes > MAX_TOTAL_BYTES:
            raise Usage(f"{display}: more than {MAX_TOTAL_BYTES} bytes of source read in all (the cap on one run)")


    def listdir(self, rel):
        if self.zf is not None:
            pre = rel.rstrip("/") + "/"
            return sorted({n[len(pre):] for n in self.names if n.startswith(pre) and "/" not in n[len(pre):]})
        p = os.path.join(self.root, rel)
        return sorted(os.listdir(p)) if os.path.isdir(p) else []

    def module(self, dotted):
        rel = dotted.replace(".", "/")
        for cand in (rel + ".py", rel + "/__init__.py"):
            text = self.read(cand)
            if text is not None:
                return cand, text
        return None, None


def read_capped(path, budget):
    """The bytes of a regular file, within the caps (a FIFO or a directory named *.py is refused, not opened)."""
    if not os.path.isfile(path):
        raise Usage(f"{path}: not a regular file")
    budget.count(path, os.path.getsize(path))
    with open(path, "rb") as f:
        return f.read(MAX_SOURCE_BYTES + 1)


def decode_source(display, raw):
    """Source bytes as text, in the encoding the file declares (PEP 263; UTF-8 when it declares none)."""
    if len(raw) > MAX_SOURCE_BYTES:
        raise Usage(f"{display}: over the {MAX_SOURCE_BYTES}-byte cap on one source file")
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(enc)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise Usage(f"{display}: not readable as Python source text ({e})")


def find_root(path):
    """The directory above `path` that holds `vllm/distributed`, if any."""
    d = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path))
    while True:
        if os.path.isdir(os.path.join(d, "vllm", "distributed")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def package_files(tree):
    """The connector's own files: the package folder's modules (not its subpackages: `store/` is the
    MooncakeStoreConnector, spec/store-lookup), or generation 1's single module."""
    files = [f"{PACKAGE_DIR}/{n}" for n in tree.listdir(PACKAGE_DIR) if n.endswith(".py")]
    if files:
        return files, 2
    if tree.read(GEN1_FILE) is not None:
        return [GEN1_FILE], 1
    return [], None


def open_input(path):
    """(tree or None, [(display path, text)], generation or None, input description)."""
    if not os.path.exists(path):
        raise Usage(f"{path}: no such file or directory")
    if os.path.isfile(path) and zipfile.is_zipfile(path):
        tree = Tree(zf=zipfile.ZipFile(path))
        files, gen = package_files(tree)
        if not files:
            raise Usage(f"{path}: a zip without {PACKAGE_DIR}/ or {GEN1_FILE} (not a vLLM wheel with the MooncakeConnector)")
        return tree, [(f, tree.read(f)) for f in files], gen, {"kind": "wheel", "path": os.path.basename(path)}
    if os.path.isdir(path) and os.path.isdir(os.path.join(path, "vllm", "distributed")):
        tree = Tree(root=os.path.abspath(path))
        files, gen = package_files(tree)
        if not files:
            raise Usage(f"{path}: a vLLM tree without {PACKAGE_DIR}/ or {GEN1_FILE}")
        return tree, [(f, tree.read(f)) for f in files], gen, {"kind": "checkout", "path": path}
    root = find_root(path)
    tree = Tree(root=root) if root else None
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".py"))
        if not names:
            raise Usage(f"{path}: a directory with neither vllm/ nor Python files")
        files = [os.path.join(path, n) for n in names]
        kind = "package"
    elif path.endswith(".py"):
        files, kind = [path], "file"
    else:
        raise Usage(f"{path}: not a wheel, a vLLM checkout, a package folder or a .py file")
    out = []
    budget = tree if tree is not None else Tree(root=None)
    for f in files:
        rel = os.path.relpath(os.path.abspath(f), root).replace(os.sep, "/") if root else f
        out.append((rel, decode_source(f, read_capped(f, budget))))
    gen = 1 if any(r.endswith("v1/mooncake_connector.py") for r, _ in out) else None
    return tree, out, gen, {"kind": kind, "path": path}


def version_of(tree, info):
    """(release, build commit) from vllm/_version.py (wheels and built checkouts), else (None, None)."""
    text = tree.read(VERSION_FILE) if tree else None
    return parse_version_file(text) if text is not None else (None, None)


def parse_version_file(text):
    """(release, build commit such as `g4ba787ec9`) stated by the text of vllm/_version.py; None where absent."""
    v = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
    c = re.search(r"""commit_id\s*=\s*['"](g?[0-9a-f]{7,})['"]""", text) or re.search(r"\+(g[0-9a-f]{7,})", text)
    return (v.group(1) if v else None), (c.group(1) if c else None)


def git_head(path):
    """The commit a checkout's files were read at: `HEAD`, when no file under PATH differs from it (else None:
    the revision is named after the files' digest instead)."""
    d = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    try:
        r = subprocess.run(["git", "-C", d, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=20)
        dirty = subprocess.run(["git", "-C", d, "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    head = r.stdout.strip()
    if r.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}", head) or dirty.returncode != 0 or dirty.stdout.strip():
        return None
    return head


# ------------------------------------------------------------------------------------------- type language
def dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class TypeError_(Exception):
    pass


def type_text(node):
    """An annotation in the spec's type language (spec/README.md, "Types"); TypeError_ when it has no
    spelling there. Names other than the builtins are kept: aliases, enums, structs (checked later)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return type_text(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = dotted(node)
        short = name.rsplit(".", 1)[-1] if name and name.startswith(("typing.", "builtins.")) else name
        if short in SCALARS:
            return SCALARS[short]
        if short in ("list", "List", "dict", "Dict", "tuple", "Tuple"):
            raise TypeError_(f"bare `{name}` (no element type)")
        if name and "." not in name:
            return name
        raise TypeError_(f"`{name}`")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = union_parts(node)
        return union_text(parts)
    if isinstance(node, ast.Subscript):
        head = dotted(node.value) or ""
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        short = head.rsplit(".", 1)[-1]
        if head in LISTS or short in ("list", "List"):
            return f"list[{type_text(args[0])}]"
        if head in DICTS or short in ("dict", "Dict"):
            return f"dict[{type_text(args[0])}, {type_text(args[1])}]"
        if head in TUPLES or short in ("tuple", "Tuple"):
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is Ellipsis:
                return f"tuple[{type_text(args[0])}, ...]"
            return "tuple[" + ", ".join(type_text(a) for a in args) + "]"
        if short == "Optional":
            return f"optional[{type_text(args[0])}]"
        if short == "Union":
            return union_text(args)
        if short == "Annotated":
            raise TypeError_(f"`{ast.unparse(node)}` (a constraint: msgspec.Meta)")
        raise TypeError_(f"`{ast.unparse(node)}`")
    raise TypeError_(f"`{ast.unparse(node)}`")


def union_parts(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return union_parts(node.left) + union_parts(node.right)
    return [node]


def union_text(parts):
    texts = [type_text(p) for p in parts]
    others = [t for t in texts if t != "None"]
    if len(others) == 1 and len(texts) == 2:
        return f"optional[{others[0]}]"
    raise TypeError_("a union other than `T | None`: " + " | ".join(texts))


def names_in(text):
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)) - {"list", "dict", "tuple", "optional", "int", "str", "bool", "float", "bytes", "any", "None"}


# ------------------------------------------------------------------------------------------------- modules
class Module:
    def __init__(self, rel, text):
        self.rel = rel
        self.tree = ast.parse(text, filename=rel)
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        self.imports = {}  # local name -> (module, name) for `from X import Y`
        self.aliases = {}  # name -> type expression node
        pkg = rel[:-3].replace("/", ".") if rel.endswith(".py") else None
        for n in self.tree.body:
            if isinstance(n, ast.ImportFrom):
                mod = n.module or ""
                if n.level and pkg:
                    parts = pkg.split(".")
                    base = parts[: len(parts) - n.level]
                    mod = ".".join(base + ([mod] if mod else []))
                for a in n.names:
                    self.imports[a.asname or a.name] = (mod, a.name)
            target, value = None, None
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                target, value = n.targets[0].id, n.value
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None \
                    and (dotted(n.annotation) or "").endswith("TypeAlias"):
                target, value = n.target.id, n.value
            elif type(n).__name__ == "TypeAlias":  # `type X = ...` (Python 3.12)
                target, value = n.name.id, n.value
            if target and value is not None and looks_like_type(value):
                self.aliases[target] = value


def looks_like_type(v):
    if isinstance(v, ast.Name):
        return v.id in SCALARS or v.id[:1].isupper()
    if isinstance(v, ast.Subscript):
        return (dotted(v.value) or "").rsplit(".", 1)[-1] in ("list", "List", "dict", "Dict", "tuple", "Tuple", "Optional", "Union")
    if isinstance(v, ast.BinOp) and isinstance(v.op, ast.BitOr):
        return all(looks_like_type(p) or (isinstance(p, ast.Constant) and p.value is None) for p in union_parts(v))
    return False


def base_names(cls):
    return [dotted(b) or ast.unparse(b) for b in cls.bases]


def kw_value(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


class Reader:
    def __init__(self, tree, files):
        self.tree = tree
        self.modules = [Module(rel, text) for rel, text in files]
        self.not_derived = []
        self.noted = set()
        self.followed = []

    def note(self, msg):
        if msg not in self.noted:
            self.noted.add(msg)
            self.not_derived.append(msg)

    def find_class(self, name):
        for m in self.modules:
            if name in m.classes:
                return m, m.classes[name]
        return None, None

    # ---- structs
    def is_struct(self, cls, seen=()):
        for b in base_names(cls):
            if b in ("msgspec.Struct", "Struct"):
                return True
            short = b.rsplit(".", 1)[-1]
            if short not in seen:
                _, parent = self.find_class(short)
                if parent is not None and self.is_struct(parent, seen + (short,)):
                    return True
        return False

    def struct_fields(self, mod, cls, where, seen=()):
        # By name, in order; a field declared again moves to the end (linear in the number of fields).
        fields = {}
        for b in base_names(cls):
            short = b.rsplit(".", 1)[-1]
            pm, parent = self.find_class(short)
            if short in seen or short == cls.name:
                self.note(f"{where}: inherits from {short} in a cycle: that base is read once")
                continue
            if parent is not None and self.is_struct(parent):
                for f in self.struct_fields(pm, parent, where, seen + (cls.name,)):
                    fields.pop(f["name"], None)
                    fields[f["name"]] = f
        for s in cls.body:
            if not isinstance(s, ast.AnnAssign) or not isinstance(s.target, ast.Name):
                if isinstance(s, ast.Assign) and not any(isinstance(t, ast.Name) and t.id.startswith("__") for t in s.targets):
                    self.note(f"{where}: an assignment without annotation (`{ast.unparse(s)[:60]}`) is a class attribute, not a field: ignored")
                continue
            ann = dotted(s.annotation.value) if isinstance(s.annotation, ast.Subscript) else dotted(s.annotation)
            if ann and ann.rsplit(".", 1)[-1] == "ClassVar":
                continue
            name = s.target.id
            f = {"name": name}
            try:
                f["type"] = type_text(s.annotation)
            except TypeError_ as e:
                f["type"] = None
                self.note(f"{where}.{name}: type {e} has no spelling in the spec's type language")
            if s.value is not None:
                self.default_of(s.value, f, f"{where}.{name}")
            fields.pop(name, None)
            fields[name] = f
        return list(fields.values())

    def default_of(self, v, f, where):
        if isinstance(v, ast.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] == "field":
            for k in v.keywords:
                if k.arg == "default":
                    self.default_of(k.value, f, where)
                elif k.arg == "default_factory":
                    fac = dotted(k.value)
                    if fac in ("list", "dict"):
                        f["default_factory"] = fac
                    else:
                        f["default"] = None
                        self.note(f"{where}: default_factory `{ast.unparse(k.value)}` (only list and dict are read)")
                elif k.arg == "name":
                    self.note(f"{where}: msgspec.field(name=...) renames one field on the wire (not in the spec's format)")
            return
        try:
            ast.literal_eval(v)
            f["default"] = ast.unparse(v)
        except ValueError:
            f["default"] = None
            self.note(f"{where}: default `{ast.unparse(v)}` is not a literal")

    def struct_options(self, cls, where, seen=()):
        opts = {}
        for b in base_names(cls):
            short = b.rsplit(".", 1)[-1]
            if short in seen or short == cls.name:
                continue
            _, parent = self.find_class(short)
            if parent is not None and self.is_struct(parent):
                opts.update(self.struct_options(parent, where, seen + (cls.name,)))
        for k in cls.keywords:
            if k.arg in STRUCT_KWARGS:
                opts[k.arg] = kw_value(k.value)
            elif k.arg == "kw_only":
                opts["kw_only"] = kw_value(k.value)
                self.note(f"{where}: kw_only (keyword-only fields) is not in the spec's format")
            else:
                self.note(f"{where}: struct keyword `{k.arg}={ast.unparse(k.value)}` is not read")
        return opts

    # ---- enums
    def enum_members(self, cls, where):
        out, nxt = [], 1
        for s in cls.body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                name = s.targets[0].id
                if name.startswith("_"):
                    continue
                v = s.value
                if isinstance(v, ast.Call) and (dotted(v.func) or "").endswith("auto"):
                    value = nxt
                else:
                    try:
                        value = ast.literal_eval(v)
                    except ValueError:
                        self.note(f"{where}.{name}: value `{ast.unparse(v)}` is not a literal")
                        continue
                if not isinstance(value, int) or isinstance(value, bool):
                    self.note(f"{where}.{name}: value {value!r} is not an int")
                    continue
                out.append({"name": name, "value": value})
                nxt = value + 1
        return out

    # ---- aliases
    def alias(self, name, depth=0):
        """(type text, where) of alias `name`, following `from X import name` into the tree."""
        for m in self.modules:
            if name in m.aliases:
                return self.alias_text(m.aliases[name], f"{m.rel}"), m.rel
        for m in self.modules:
            if name in m.imports:
                mod, orig = m.imports[name]
                return self.imported_alias(mod, orig, depth)
        return None, None

    def imported_alias(self, mod, name, depth):
        if self.tree is None or depth > 5:
            return None, f"imported from {mod}"
        rel, text = self.tree.module(mod)
        if text is None:
            return None, f"imported from {mod}, which the input does not hold"
        m = Module(rel, text)
        if rel not in self.followed:
            self.followed.append(rel)
        if name in m.aliases:
            return self.alias_text(m.aliases[name], rel), rel
        if name in m.imports:
            return self.imported_alias(m.imports[name][0], m.imports[name][1], depth + 1)
        return None, f"imported from {mod}, where it is not a module-level alias"

    def alias_text(self, node, where):
        try:
            return type_text(node)
        except TypeError_ as e:
            self.note(f"alias in {where}: {e} has no spelling in the spec's type language")
            return None

    # ---- bootstrap
    def bootstrap(self):
        for m in self.modules:
            routes = []
            for node in ast.walk(m.tree):
                r = route_of(node)
                if r:
                    routes.append((r, node))
            if routes:
                return self.read_bootstrap(m, routes)
        return None

    def read_bootstrap(self, m, found):
        funcs = {}
        for n in ast.walk(m.tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.setdefault(n.name, n)
        routes, models, dup = [], [], None
        for (method, path, handler, response_model), _ in found:
            fn = funcs.get(handler) if handler else None
            where = f"{m.rel}, {method} {path}"
            route = {"method": method, "path": path, "handler": handler, "request": None, "responses": []}
            if fn is None:
                self.note(f"{where}: handler `{handler}` not found: responses not derived")
                routes.append(route)
                continue
            for a in fn.args.args + fn.args.kwonlyargs:
                if a.arg == "self" or a.annotation is None:
                    continue
                t = dotted(a.annotation)
                if t and t in m.classes:
                    route["request"] = t
                    models.append(t)
                else:
                    self.note(f"{where}: parameter `{a.arg}: {ast.unparse(a.annotation)}` is not a model of the file")
            body = response_model or fn.returns
            ok_seen = False
            for n in ast.walk(fn):
                if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and (dotted(n.exc.func) or "").endswith("HTTPException"):
                    kws = {k.arg: k.value for k in n.exc.keywords}
                    args = n.exc.args
                    status = kws.get("status_code", args[0] if args else None)
                    detail = kws.get("detail", args[1] if len(args) > 1 else None)
                    try:
                        status = ast.literal_eval(status)
                    except (ValueError, TypeError):
                        self.note(f"{where}: HTTPException status `{ast.unparse(status)}` is not a literal")
                        continue
                    resp = {"status": status, "error": True}
                    if detail is not None:
                        resp["detail"] = template(detail)
                    route["responses"].append(resp)
                elif isinstance(n, ast.Return) and n.value is not None and not ok_seen:
                    ok_seen = True
                    resp = {"status": 200}
                    if isinstance(n.value, ast.Dict):
                        try:
                            resp["json"] = ast.literal_eval(n.value)
                        except ValueError:
                            self.note(f"{where}: returned dict `{ast.unparse(n.value)[:60]}` is not a literal")
                    elif body is not None:
                        try:
                            resp["body"] = type_text(body)
                        except TypeError_ as e:
                            self.note(f"{where}: response type {e} has no spelling in the spec's type language")
                    route["responses"].append(resp)
            if body is not None:
                try:
                    models.extend(n for n in names_in(type_text(body)) if n in m.classes)
                except TypeError_:
                    pass
            if route["request"]:
                route["responses"].append({"status": 422, "framework": True})
                eq_return = any(isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                                and any(isinstance(o, ast.Eq) for o in n.test.ops)
                                and any(isinstance(s, ast.Return) for s in n.body) for n in ast.walk(fn))
                dup = "accept-identical" if eq_return else "reject"
            routes.append(route)
        out_models, todo = [], list(dict.fromkeys(models))
        while todo:
            name = todo.pop(0)
            if any(x["name"] == name for x in out_models):
                continue
            cls = m.classes[name]
            bases = base_names(cls)
            deco = [dotted(d.func) if isinstance(d, ast.Call) else dotted(d) for d in cls.decorator_list]
            if any(b.endswith("BaseModel") for b in bases):
                kind = "pydantic.BaseModel"
            elif any(d and d.endswith("dataclass") for d in deco):
                kind = "dataclass"
            else:
                self.note(f"{m.rel}: model {name} is neither a pydantic BaseModel nor a dataclass")
                continue
            fields = self.struct_fields(m, cls, f"{m.rel}, {name}")
            out_models.append({"name": name, "kind": kind, "fields": fields})
            for f in fields:
                todo.extend(n for n in names_in(f.get("type") or "") if n in m.classes)
        return {"file": m.rel, "routes": routes, "models": out_models, "duplicate_registration": dup}


def route_of(node):
    """(method, path, handler name, response_model node) of a FastAPI route registration, or None:
    `app.post("/p")(handler)`, `@app.get("/p")` on a function, `app.add_api_route("/p", handler, methods=[...])`."""
    def reg(call):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            return None
        verb = call.func.attr
        if verb in ("get", "post", "put", "delete", "patch") and call.args and isinstance(call.args[0], ast.Constant) \
                and isinstance(call.args[0].value, str) and call.args[0].value.startswith("/"):
            rm = next((k.value for k in call.keywords if k.arg == "response_model"), None)
            return verb.upper(), call.args[0].value, rm
        return None
    if isinstance(node, ast.Call):
        r = reg(node.func)
        if r and node.args:
            h = node.args[0]
            return r[0], r[1], h.attr if isinstance(h, ast.Attribute) else dotted(h), r[2]
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_api_route" and len(node.args) >= 2:
            path, h = node.args[0], node.args[1]
            methods = next((k.value for k in node.keywords if k.arg == "methods"), None)
            ms = ast.literal_eval(methods) if methods is not None else ["GET"]
            rm = next((k.value for k in node.keywords if k.arg == "response_model"), None)
            return ms[0].upper(), ast.literal_eval(path), h.attr if isinstance(h, ast.Attribute) else dotted(h), rm
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for d in node.decorator_list:
            r = reg(d)
            if r:
                return r[0], r[1], node.name, r[2]
    return None


def template(node):
    """An HTTPException detail as the spec writes it: literal text, `{name}` for each interpolated value
    (the last attribute name of its expression)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                e = v.value
                name = e.attr if isinstance(e, ast.Attribute) else (e.id if isinstance(e, ast.Name) else "value")
                out.append("{" + name + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left) + template(node.right)
    return "{" + ast.unparse(node) + "}"


# ------------------------------------------------------------------------------- what the code sends and reads
ENV_CALLS = {"os.environ.get", "os.getenv", "os.environ.setdefault", "environ.get", "environ.setdefault", "getenv"}


def parents_of(tree):
    """node -> (parent node, the list of statements it is in, or None)."""
    out = {}
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, ast.AST):
                        out[child] = (node, value if isinstance(child, ast.stmt) else None)
            elif isinstance(value, ast.AST):
                out[value] = (node, None)
    return out


def enclosing_function(node, parents):
    while node in parents:
        node = parents[node][0]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def assigns(stmt, name):
    """Whether `stmt` (or a statement nested in it, outside nested functions) binds `name`."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            return True
        if isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name) and n.target.id == name:
            return True
        if isinstance(n, ast.NamedExpr) and n.target.id == name:
            return True
    return False


def reaching_value(node, name, parents):
    """The value last bound to `name` before `node` on the straight path up to its function: the nearest
    earlier statement of the same block (then of each enclosing block) that binds it, when that statement is a
    plain `name = value`; None when the binding is conditional, nested or absent."""
    cur = node
    while cur in parents:
        parent, block = parents[cur]
        if block is not None and isinstance(cur, ast.stmt):
            for s in reversed(block[: block.index(cur)]):
                if not assigns(s, name):
                    continue
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                    return s.value
                if isinstance(s, ast.AnnAssign) and s.value is not None:
                    return s.value
                return None
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
        cur = parent
    return None


def text_template(node, parents, depth=0):
    """A reply text as the spec writes it: literal text (braces doubled), `{name}` for each interpolated value
    (the last attribute name of its expression; `str(e)` is `{e}`); None when it is not a text the source spells."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value).replace("{", "{{").replace("}", "}}"))
            elif isinstance(v, ast.FormattedValue):
                e = v.value
                name = e.attr if isinstance(e, ast.Attribute) else (e.id if isinstance(e, ast.Name) else "value")
                spec = text_template(v.format_spec, parents, depth + 1) if v.format_spec is not None else None
                out.append("{" + name + (":" + spec if spec else "") + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = text_template(node.left, parents, depth + 1), text_template(node.right, parents, depth + 1)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.Name):
        v = reaching_value(node, node.id, parents)
        return text_template(v, parents, depth + 1) if v is not None else None
    return None


def status_names(node, enums, parents, depth=0):
    """The enum members a `status=` expression can be: `E.X`, both branches of `E.X if c else E.Y`, or what a
    local name was last plainly bound to (`reaching_value`)."""
    if depth > 4 or node is None:
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
        owner = (dotted(node.value) or "").rsplit(".", 1)[-1]
        return [node.attr] if owner in enums else None
    if isinstance(node, ast.IfExp):
        a, b = status_names(node.body, enums, parents, depth + 1), status_names(node.orelse, enums, parents, depth + 1)
        return list(dict.fromkeys(a + b)) if a is not None and b is not None else None
    if isinstance(node, ast.Name):
        return status_names(reaching_value(node, node.id, parents), enums, parents, depth + 1)
    return None


def literal_text(node):
    """A literal default as the source spells it (`'rdma'`, `10`, `None`); None when it is not a literal."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return ast.unparse(node)


def env_default(node):
    """An environment default as the process sees it: the string itself (`"0"` is `0`)."""
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return "None" if v is None else str(v)


def is_extra_config(node):
    """`....kv_connector_extra_config`, or a name that holds it (`extra_config`)."""
    if isinstance(node, ast.Attribute) and node.attr == "kv_connector_extra_config":
        return True
    return isinstance(node, ast.Name) and node.id.endswith("extra_config")


def envs_aliases(mod):
    """Local names bound to vLLM's `vllm.envs` module."""
    names = set()
    for n in ast.walk(mod.tree):
        if isinstance(n, ast.ImportFrom) and n.module == "vllm":
            names.update(a.asname or a.name for a in n.names if a.name == "envs")
        elif isinstance(n, ast.Import):
            names.update(a.asname for a in n.names if a.name == "vllm.envs" and a.asname)
    return names


def envs_declarations(tree):
    """{NAME: (type text or None, default or None)} from vllm/envs.py's `if TYPE_CHECKING:` declarations."""
    text = tree.read("vllm/envs.py") if tree is not None else None
    if text is None:
        return None
    out = {}
    for n in ast.parse(text).body:
        if isinstance(n, ast.If) and (dotted(n.test) or "").endswith("TYPE_CHECKING"):
            for s in n.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    try:
                        ty = type_text(s.annotation)
                    except TypeError_:
                        ty = None
                    out[s.target.id] = (ty, env_default(s.value) if s.value is not None else None)
    return out


class WireReads:
    """What the connector's code sends and reads beyond its declarations: the literal reply texts and their
    statuses, the kv_connector_extra_config keys, the environment variables, the structs each decoder is built for."""

    def __init__(self, reader, structs, enums):
        self.r = reader
        self.structs = {s["name"] for s in structs}
        self.enums = set(enums)
        self.replies, self.config, self.env, self.decoders = [], [], [], []
        self.envs_py = None

    def where(self, m, node, parents):
        fn = enclosing_function(node, parents)
        return {"file": m.rel, "function": fn.name if fn else None, "line": getattr(node, "lineno", None)}

    def read(self):
        for m in self.r.modules:
            parents = parents_of(m.tree)
            envs = envs_aliases(m)
            decoder_targets = {}
            for node in ast.walk(m.tree):
                if isinstance(node, ast.Call):
                    self.call(m, node, parents, decoder_targets)
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in envs \
                        and re.fullmatch(r"[A-Z][A-Z0-9_]*", node.attr):
                    self.env_read(m, node, parents, node.attr, None, "envs")
                elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                        and (dotted(node.comparators[0]) or "") in ("os.environ", "environ"):
                    for name in self.membership_names(node.left, parents):
                        self.env_read(m, node, parents, name, "None", "presence")
                elif isinstance(node, ast.Subscript) and (dotted(node.value) or "") in ("os.environ", "environ") \
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    self.env_read(m, node, parents, node.slice.value, None, "os")
            for d in [d for d in self.decoders if d["file"] == m.rel]:
                if d.get("target"):
                    d["used_in"] = sorted({enclosing_function(n, parents).name for n in ast.walk(m.tree)
                                           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                           and n.func.attr == "decode" and ast.unparse(n.func.value) == d["target"]
                                           and enclosing_function(n, parents) is not None})

        for lst in (self.replies, self.config, self.env, self.decoders):
            lst.sort(key=lambda x: (x["file"], x["line"] or 0))

    def membership_names(self, left, parents):
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return [left.value]
        if isinstance(left, ast.Name):
            # `v in os.environ for v in ("A", "B")`
            node = left
            while node in parents:
                node = parents[node][0]
                if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
                    for g in node.generators:
                        if isinstance(g.target, ast.Name) and g.target.id == left.id \
                                and isinstance(g.iter, (ast.Tuple, ast.List, ast.Set)) \
                                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in g.iter.elts):
                            return [e.value for e in g.iter.elts]
                    break
        self.r.note(f"an environment membership test `{ast.unparse(left)} in os.environ` names no literal variable")
        return []

    def call(self, m, node, parents, decoder_targets):
        func = dotted(node.func) or ""
        short = func.rsplit(".", 1)[-1]
        # Reply texts: `Struct(status=..., err_msg=...)`.
        if short in self.structs:
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            if "err_msg" in kws and not (isinstance(kws["err_msg"], ast.Constant) and kws["err_msg"].value is None):
                w = self.where(m, node, parents)
                text = text_template(kws["err_msg"], parents)
                status = status_names(kws["status"], self.enums, parents) if "status" in kws else None
                at = f"{w['file']}, {w['function']}, line {w['line']}"
                if text is None:
                    self.r.note(f"reply text at {at}: `err_msg={ast.unparse(kws['err_msg'])[:60]}` is not a text the source spells")
                elif status is None:
                    self.r.note(f"reply text {text!r} at {at}: status `{ast.unparse(kws['status']) if 'status' in kws else '(none)'}` is not an enum member")
                else:
                    self.replies.append(dict(message=short, text=text, status=status, **w))
        # kv_connector_extra_config keys.
        if isinstance(node.func, ast.Attribute) and node.args:
            key = node.args[0]
            attr = node.func.attr
            if (attr == "get_from_extra_config" or (attr == "get" and is_extra_config(node.func.value))):
                w = self.where(m, node, parents)
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    d = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "default"), None)
                    default = "None" if d is None else literal_text(d)
                    if d is not None and default is None:
                        self.r.note(f"kv_connector_extra_config[{key.value!r}] at {w['file']}, {w['function']}: default `{ast.unparse(d)[:60]}` is not a literal")
                    self.config.append(dict(name=key.value, default=default, **w))
                else:
                    self.r.note(f"a kv_connector_extra_config read at {w['file']}, {w['function']}: key `{ast.unparse(key)[:60]}` is not a literal")
        # Environment variables read through os.
        if func in ENV_CALLS and node.args:
            key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                d = node.args[1] if len(node.args) > 1 else None
                default = "None" if d is None else env_default(d)
                self.env_read(m, node, parents, key.value, default, "os")
            else:
                self.r.note(f"an environment read `{ast.unparse(node)[:60]}` names no literal variable")
        # Decoders: `msgspec.msgpack.Decoder(X)`, `msgspec.msgpack.decode(b, type=X)`.
        if short in ("Decoder", "decode") and ("msgpack" in func or func in ("Decoder",)):
            t = node.args[0] if short == "Decoder" and node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
            if t is None:
                return
            w = self.where(m, node, parents)
            name = dotted(t)
            if name is None or name.rsplit(".", 1)[-1] not in self.structs:
                self.r.note(f"a msgpack decoder at {w['file']}, {w['function']} is built for `{ast.unparse(t)[:60]}`, not a struct of the files read")
                return
            parent = parents.get(node, (None, None))[0]
            target = ast.unparse(parent.targets[0]) if isinstance(parent, ast.Assign) and len(parent.targets) == 1 else None
            self.decoders.append(dict(struct=name.rsplit(".", 1)[-1], target=target, used_in=[] if target else [w["function"]], **w))

    def env_read(self, m, node, parents, name, default, how):
        w = self.where(m, node, parents)
        ty = None
        if how == "envs":
            if self.envs_py is None:
                self.envs_py = envs_declarations(self.r.tree) or {}
                if self.r.tree is not None and self.r.tree.read("vllm/envs.py") is not None and "vllm/envs.py" not in self.r.followed:
                    self.r.followed.append("vllm/envs.py")
            decl = self.envs_py.get(name)
            if decl is None:
                self.r.note(f"environment variable {name}: its type and default are declared in vllm/envs.py, which the input does not hold")
            else:
                ty, default = decl
        elif how == "presence":
            ty = "optional[str]"
        else:
            ty = "str" if default not in (None, "None") else "optional[str]"
        self.env.append(dict(name=name, type=ty, default=default, how=how, **w))


# -------------------------------------------------------------------------------------------------- main
def extract(path):
    tree, files, gen, info = open_input(path)
    r = Reader(tree, files)
    release, build_commit = version_of(tree, info)
    structs, enum_classes = [], {}
    for m in r.modules:
        for name, cls in m.classes.items():
            where = f"{m.rel}, {name}"
            if r.is_struct(cls):
                structs.append({"name": name, "file": m.rel, "line": cls.lineno, "kind": "msgspec.Struct",
                                "options": r.struct_options(cls, where), "fields": r.struct_fields(m, cls, where)})
            elif any(b.rsplit(".", 1)[-1] in ("IntEnum", "Enum", "IntFlag", "StrEnum") for b in base_names(cls)):
                enum_classes[name] = (m, cls)
    # A field-less Struct that others derive from is their common base (shared options), not a message.
    parents = {b.rsplit(".", 1)[-1] for m in r.modules for c in m.classes.values() if r.is_struct(c) for b in base_names(c)}
    for st in [x for x in structs if x["name"] in parents and not x["fields"]]:
        r.note(f"{st['file']}, {st['name']}: a field-less base of other structs, not taken for a message")
        structs.remove(st)
    if not structs:
        raise Usage(f"{path}: no msgspec.Struct class in {', '.join(rel for rel, _ in files)}")
    boot = r.bootstrap() if gen != 1 else None
    # Names the wire uses: struct field types, then through aliases; enums and aliases only when used.
    used, todo = set(), [f.get("type") or "" for s in structs for f in s["fields"]]
    if boot:
        todo += [f.get("type") or "" for md in boot["models"] for f in md["fields"]]
        todo += [resp.get("body") or "" for rt in boot["routes"] for resp in rt["responses"]]
    aliases, enums = {}, []
    defined = {s["name"] for s in structs} | ({md["name"] for md in boot["models"]} if boot else set())
    while todo:
        for n in names_in(todo.pop()):
            if n in used:
                continue
            used.add(n)
            if n in defined:
                continue
            if n in enum_classes:
                m, cls = enum_classes[n]
                kinds = [b.rsplit(".", 1)[-1] for b in base_names(cls)]
                if "IntEnum" not in kinds:
                    r.note(f"{m.rel}, {n}: a {kinds[0]} on the wire (only IntEnum is read)")
                enums.append({"name": n, "file": m.rel, "line": cls.lineno, "kind": "IntEnum",
                              "members": r.enum_members(cls, f"{m.rel}, {n}")})
                continue
            text, where = r.alias(n)
            if text is not None:
                aliases[n] = {"type": text, "file": where}
                todo.append(text)
            else:
                r.note(f"type name `{n}`: no alias, enum or struct of that name" + (f" ({where})" if where else "") +
                       ": kept as the base revision has it")
    enums.sort(key=lambda e: (e["file"], e["line"]))
    digest = hashlib.sha256()
    for rel, text in sorted(files):
        digest.update(rel.encode() + b"\0" + text.encode() + b"\0")
    commit = git_head(path) if info["kind"] != "wheel" else None
    wr = WireReads(r, structs, enum_classes)
    wr.read()
    r.note("behaviour (every [behaviour] item): what the code does with the messages is not readable from declarations")
    r.note("transport (sockets, frames, message directions) and kv_transfer_params are not read")
    return {
        "format": FORMAT,
        "input": info,
        "generation": gen,
        "release": release,
        "build_commit": build_commit,
        "git_commit": commit,
        "sources_sha256": digest.hexdigest(),
        "files": [rel for rel, _ in files],
        "followed": r.followed,
        "aliases": aliases,
        "enums": enums,
        "structs": structs,
        "bootstrap": boot,
        "replies": wr.replies,
        "extra_config": wr.config,
        "env": wr.env,
        "decoders": wr.decoders,
        "not_derived": r.not_derived,
    }


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        doc = extract(argv[0])
    except Usage as e:
        print(f"extract: {e}", file=sys.stderr)
        return 2
    except SyntaxError as e:
        print(f"extract: {e.filename or argv[0]}: Python syntax error at line {e.lineno}: {e.msg}", file=sys.stderr)
        return 2
    except (RecursionError, MemoryError):
        print(f"extract: {argv[0]}: nested too deeply to read (an expression or a chain of bases past Python's "
              "recursion limit)", file=sys.stderr)
        return 2
    except zipfile.BadZipFile as e:
        print(f"extract: {argv[0]}: not a readable wheel: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"extract: {argv[0]}: {e}", file=sys.stderr)
        return 2
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
