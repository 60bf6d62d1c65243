"""Finding a vLLM release's wheel and loading its Mooncake message classes without importing vLLM.

The connector module cannot be imported (it pulls in torch and the rest of vLLM), so the module source is
read out of the wheel and parsed with `ast`; only what the messages need is kept: the classes that derive
from `msgspec.Struct` or an enum, the name aliases they mention (`ReqId = str`), and nothing else. Those
nodes are turned back into code with `ast.unparse` (so no comment or docstring of vLLM's is carried along),
and executed in a fresh module whose only imports are msgspec, enum and typing.
"""
import ast
import os
import re
import subprocess
import sys
import types
import zipfile

# Where each generation keeps the connector (the module holding the message classes), and how a wheel states
# its build commit: shared with the spec extractor (conformance/extract/extract.py, embedded in mooncake-conformance).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "conformance", "extract"))
from extract import CONNECTOR_PATHS, VERSION_FILE, parse_version_file  # noqa: E402


def cache_dir():
    return os.environ.get("MOONCAKE_WHEEL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mooncake-wire", "wheels")


def find_wheel(release, download=True, python=None):
    """Path of the release's wheel in the cache; fetched with `pip download --no-deps` when absent."""
    d = cache_dir()
    pat = re.compile(r"^vllm-" + re.escape(release) + r"(-\d+)?-.*\.whl$")
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            if pat.match(name):
                return os.path.join(d, name)
    if not download:
        raise SystemExit(f"no wheel of vllm {release} in {d} (set MOONCAKE_WHEEL_CACHE, or allow the download)")
    os.makedirs(d, exist_ok=True)
    cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", d, f"vllm=={release}"]
    print("fetching:", " ".join(cmd), file=sys.stderr)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise SystemExit(f"pip download of vllm=={release} failed (exit {r.returncode})")
    return find_wheel(release, download=False)


def read_connector(wheel):
    """(path inside the wheel, source text, build commit or None) of the connector module."""
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        for p in CONNECTOR_PATHS:
            if p in names:
                src = z.read(p).decode("utf-8")
                commit = None
                if VERSION_FILE in names:
                    commit = parse_version_file(z.read(VERSION_FILE).decode("utf-8", "replace"))[1]
                return p, src, commit
    raise SystemExit(f"{wheel}: no Mooncake connector module ({', '.join(CONNECTOR_PATHS)})")


def _is_message_class(node):
    if not isinstance(node, ast.ClassDef):
        return False
    for b in node.bases:
        text = ast.unparse(b)
        if text.endswith("Struct") or text.endswith("Enum") or text.endswith("IntEnum"):
            return True
    return False


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def extract(source):
    """The code (a string) that defines the message classes: aliases first, then the classes in file order.

    Class bodies keep only field annotations and plain assignments (enum members, field defaults); methods,
    docstrings and decorators are dropped."""
    tree = ast.parse(source)
    classes, aliases = [], {}
    for node in tree.body:
        if _is_message_class(node):
            body = [s for s in node.body if isinstance(s, (ast.AnnAssign, ast.Assign))]
            node = ast.ClassDef(name=node.name, bases=node.bases, keywords=node.keywords, body=body or [ast.Pass()],
                                decorator_list=[], type_params=[])
            classes.append(node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp)):
            aliases[node.targets[0].id] = node
    defined = {c.name for c in classes}
    wanted, todo = [], set().union(*[_names(c) for c in classes]) if classes else set()
    while todo:  # aliases the classes use, and the aliases those use
        name = todo.pop()
        if name in aliases and name not in defined and aliases[name] not in wanted:
            wanted.append(aliases[name])
            todo |= _names(aliases[name].value)
    order = [n for n in tree.body if n in wanted]
    module = ast.Module(body=order + classes, type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module))


PRELUDE = """import enum
from enum import Enum, IntEnum
import typing
from typing import Any, Optional, Union
import msgspec
"""


def load_module(code, name):
    """Executes the extracted code as a module of its own (msgspec resolves annotations through it)."""
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(PRELUDE + code, f"<{name}>", "exec"), mod.__dict__)
    return mod


def load_release(release, download=True, python=None):
    """(module with the release's message classes, connector path in the wheel, build commit, extracted code)."""
    wheel = find_wheel(release, download=download, python=python)
    path, src, commit = read_connector(wheel)
    code = extract(src)
    mod = load_module(code, "mooncake_vllm_" + re.sub(r"\W", "_", release))
    return mod, path, commit, code
