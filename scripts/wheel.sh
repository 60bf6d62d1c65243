#!/usr/bin/env bash
# The Python wheel (pyproject.toml: maturin, `bindings = "bin"`): `mooncake-conformance` and `mooncake-peer` as
# programs in the environment pip installs it into, libzmq linked in, `python -m mooncake_wire` too. `build` makes
# it; `check` proves it as a user gets it: a fresh venv with no Rust on PATH installs it (timed), and from an empty
# directory the installed runner lists and passes the same cases as this tree's, `--testee` with the installed
# peer passes, `extract` runs with the venv's own Python, `python -m mooncake_wire` and `mooncake-peer --help`
# answer. Prints the wheel's size, its platform tag (auditwheel) and the install time.
#
# Usage: scripts/wheel.sh                         build from this tree, then check (target/wheels)
#        scripts/wheel.sh build [--release] [--src DIR] [--out DIR]
#                                                 the check build reuses the test build's artifacts (`dev` at
#                                                 opt-level 1 with the features `cargo test --workspace` unified);
#                                                 --release is the distribution build; --src builds another tree
#        scripts/wheel.sh check WHEEL [TREE_BINARY]
#                                                 TREE_BINARY (default target/debug/mooncake-conformance) gives the
#                                                 case count to compare with; then the hook check
#        scripts/wheel.sh hook WHEEL              the pre-commit hook (tools/pre-commit-mirror) from WHEEL
# A --release wheel is linked against glibc 2.17 with zig (tools/wheel/requirements-release.txt): manylinux2014.
# The check build's tag is what this machine's glibc allows (manylinux_2_35 on Debian 12). scripts/install-check.sh
# (in scripts/test.sh) runs build and check.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. scripts/lib/installed.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

tools() {
  local t=$repo/target/wheel-tools
  if ! cmp -s "$repo/tools/wheel/requirements.txt" "$t/requirements.txt"; then
    python3 -m venv "$t"
    "$t/bin/pip" install --quiet --disable-pip-version-check -r "$repo/tools/wheel/requirements.txt"
    cp "$repo/tools/wheel/requirements.txt" "$t/requirements.txt"
  fi
  echo "$t/bin"
}

# C and C++ compilers and the linker for x86_64 Linux with glibc 2.17, through maturin's zig driver (what
# `maturin build --zig` sets up for its own build, here for both programs' builds alike).
zig_compilers() {
  local w=$CARGO_TARGET_DIR/zig-wrappers tool
  "$1/python3" -c 'import ziglang' 2>/dev/null \
    || "$1/pip" install --quiet --disable-pip-version-check -r "$repo/tools/wheel/requirements-release.txt"
  mkdir -p "$w"
  for tool in cc c++; do
    printf '#!/bin/sh\nexport CARGO_ZIGBUILD_ZIG_COMMAND=%s CARGO_ZIGBUILD_ZIG_COMMAND_ARGS="-m ziglang"\nexec %s zig %s -- -g -fno-sanitize=all -target x86_64-linux-gnu.2.17 "$@"\n' \
      "$1/python3" "$1/maturin" "$tool" > "$w/$tool"
    chmod +x "$w/$tool"
  done
  export CC_x86_64_unknown_linux_gnu=$w/cc CXX_x86_64_unknown_linux_gnu=$w/c++ CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=$w/cc
}

build() {
  local profile=dev src=$repo out=$repo/target/wheels bin
  while [ $# -gt 0 ]; do
    case "$1" in
      --release) profile=release; shift ;;
      --src) src=$(realpath "$2"); shift 2 ;;
      --out) out=$(realpath -m "$2"); shift 2 ;;
      *) echo "wheel.sh build: unknown argument $1" >&2; exit 2 ;;
    esac
  done
  bin=$(tools)
  local t0=$SECONDS
  cd "$src"
  local features=()
  if [ "$profile" = dev ]; then
    # The check build is the test build: the test profile's settings under the `dev` name (maturin builds with
    # `cargo rustc`, where `--profile test` would mean a test harness), and the features `cargo test --workspace`
    # unified (the wire crate's `testing`, which makes some internals public and changes no behaviour, and
    # mooncake-trace's, which counts payload decodes for a test), so nothing is compiled again. mooncake-peer is the test build's own (`cargo build -p mooncake-reference` alone would
    # resolve its dependencies' features differently and compile it and mooncake-io again).
    export CARGO_PROFILE_DEV_OPT_LEVEL=1
    local unified=mooncake-wire/testing,mooncake-wire/generate,mooncake-trace/testing
    features=(--features "$unified")
    cargo build --quiet --locked --profile test --workspace --lib --bins --tests
    # Built alone with these, mooncake-conformance must resolve its dependencies' features as that build did, or
    # maturin compiles the tree a second time (about two minutes on 2 cores): say which feature drifted instead.
    python3 scripts/lib/feature_drift.py "mooncake-conformance+$unified" \
      || { echo "wheel: FAILED (the check wheel's build would compile the tree a second time)"; exit 1; }
  else
    # The distribution build: linked against glibc 2.17 by zig (pinned in tools/wheel/requirements.txt), so the
    # wheel is manylinux2014 and installs on every Linux vLLM supports; debug info stripped (symbol names kept
    # for backtraces). Both programs with the same compilers, so they share their dependencies' artifacts.
    zig_compilers "$bin"
    export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=debuginfo
    features=(--target x86_64-unknown-linux-gnu --compatibility manylinux2014)
    cargo build --quiet --locked --release --target x86_64-unknown-linux-gnu -p mooncake-reference --bin mooncake-peer
  fi
  rm -rf target/wheel-data "$out"
  mkdir -p target/wheel-data/scripts
  # mooncake-peer goes in as a data script (maturin's bin bindings take one package's programs).
  cp "$CARGO_TARGET_DIR/$([ "$profile" = release ] && echo x86_64-unknown-linux-gnu/release || echo debug)/mooncake-peer" target/wheel-data/scripts/
  "$bin/maturin" build --quiet --locked --profile "$profile" "${features[@]}" --out "$out" > "$out.log" 2>&1 \
    || { cat "$out.log"; echo "wheel: maturin build FAILED"; exit 1; }
  local wheel tag
  wheel=$(ls "$out"/*.whl)
  tag=$("$bin/auditwheel" show "$wheel" 2>&1 | tr '\n' ' ' | grep -oE 'platform tag: "[^"]+"' | head -1 || true)
  echo "wheel: $(basename "$wheel"), $(( $(stat -c %s "$wheel") / 1024 / 1024 )) MiB, built in $(( SECONDS - t0 )) s; auditwheel: ${tag:-no tag reported}"
}

check() {
  local wheel tree_bin want ms
  wheel=$(realpath "${1:?wheel.sh check WHEEL}")
  tree_bin=$(realpath "${2:-target/debug/mooncake-conformance}")
  want=$("$tree_bin" run --list | sed -n '/^$/q;p' | wc -l)
  # A user's machine: a fresh venv, no cargo or rustc on PATH, nothing of this tree.
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  python3 -m venv "$tmp/venv"
  clean_env=(env -i HOME="$tmp" PATH="$tmp/venv/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8)
  if "${clean_env[@]}" sh -c 'command -v cargo || command -v rustc' > /dev/null; then
    echo "wheel: cargo or rustc is on the clean PATH; the check would not prove an install without Rust"; exit 1
  fi
  t0=$(date +%s%N)
  "${clean_env[@]}" "$tmp/venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "wheel: installed into a fresh venv in $(( ms / 1000 )).$(( ms % 1000 / 100 )) s"
  # Every case; extract with no python3 on PATH at all (the venv's, beside the program, is found).
  without_tree "$repo" "installed_checks command_in" \
    installed_checks wheel "$want" 1 /nonexistent "${clean_env[@]}"
  "${clean_env[@]}" python -m mooncake_wire --version | grep -q '^mooncake-conformance ' \
    || { echo "wheel: python -m mooncake_wire does not run the runner"; exit 1; }
  "${clean_env[@]}" python -m mooncake_wire peer --help > /dev/null \
    || { echo "wheel: python -m mooncake_wire peer --help failed"; exit 1; }
  echo "wheel: python -m mooncake_wire runs both programs"
  hook_check "$wheel"
}

# The pre-commit hook as vLLM's repository would run it: tools/pre-commit-mirror as a hook repository of its own,
# pre-commit (pinned in tools/wheel/requirements.txt) making the hook's venv from it and the wheel (PIP_FIND_LINKS
# stands in for the package index; setuptools, the mirror's build backend, comes from the index), in a scratch
# repository holding a generation-1 connector file. A commit that adds a required field to the request is
# refused, the same announced passes, one that stages no connector file skips the hook.
hook_check() {
  local wheel=$1 bin work hook vllm f rc out version t0=$SECONDS
  bin=$(tools)
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
  grep -q "\"mooncake-wire==$version\"" "$repo/tools/pre-commit-mirror/pyproject.toml" \
    || { echo "wheel: tools/pre-commit-mirror/pyproject.toml does not pin mooncake-wire==$version"; exit 1; }
  grep -q "default: mooncake-wire==$version\$" "$repo/action.yml" || { echo "wheel: action.yml's install default is not mooncake-wire==$version"; exit 1; }
  [ "$(grep '^  files:' "$repo/.pre-commit-hooks.yaml")" = "$(grep '^  files:' "$repo/tools/pre-commit-mirror/.pre-commit-hooks.yaml")" ] \
    || { echo "wheel: the two .pre-commit-hooks.yaml files match different files"; exit 1; }
  work=$(mktemp -d)
  hook=$work/hook vllm=$work/vllm
  g() { git -C "$1" -c user.name=t -c user.email=t@t -c commit.gpgsign=false "${@:2}"; }
  cp -r "$repo/tools/pre-commit-mirror" "$hook"
  g "$hook" init -q && g "$hook" add -A && g "$hook" commit -qm hook
  f=$vllm/vllm/distributed/kv_transfer/kv_connector/v1/mooncake_connector.py
  mkdir -p "$(dirname "$f")"
  printf 'import msgspec\n\nReqId = str\n\n\nclass MooncakeAgentMetadata(msgspec.Struct, omit_defaults=True, dict=True):\n    remote_hostname: str\n    remote_port: int\n    request_ids: list[ReqId]\n    kv_caches_base_addr: list[int]\n    block_ids: list[list[int]]\n' > "$f"
  printf 'repos:\n- repo: %s\n  rev: %s\n  hooks: [{id: mooncake-wire-review}]\n' "$hook" "$(g "$hook" rev-parse HEAD)" > "$vllm/.pre-commit-config.yaml"
  g "$vllm" init -q && g "$vllm" add -A && g "$vllm" commit -qm base
  printf '    remote_engine_id: str\n' >> "$f"
  g "$vllm" add -A
  # One hook environment for the three runs (pre-commit keys it by repository and revision).
  try() { (cd "$vllm" && env PIP_FIND_LINKS="$(dirname "$wheel")" PRE_COMMIT_HOME="$work/cache" "$@" "$bin/pre-commit" run 2>&1); }
  out=$(try env) && rc=0 || rc=$?
  case "$rc:$out" in 1:*"Mooncake wire review"*Failed*"breaks a direction"*) ;; *) echo "$out" | tail -30; echo "wheel: the hook did not refuse a breaking commit (exit $rc)"; exit 1 ;; esac
  out=$(try env MOONCAKE_WIRE_BREAK=1) && rc=0 || rc=$?
  case "$rc:$out" in 0:*"Mooncake wire review"*Passed*) ;; *) echo "$out" | tail -30; echo "wheel: the hook refused an announced breaking commit (exit $rc)"; exit 1 ;; esac
  g "$vllm" commit -qm break && echo x > "$vllm/README" && g "$vllm" add -A
  out=$(try env) && rc=0 || rc=$?
  case "$rc:$out" in 0:*"Mooncake wire review"*Skipped*) ;; *) echo "$out" | tail -30; echo "wheel: the hook did not skip a commit with no connector file (exit $rc)"; exit 1 ;; esac
  rm -rf "$work"
  echo "wheel: the pre-commit hook (tools/pre-commit-mirror, pre-commit $("$bin/pre-commit" --version | cut -d' ' -f2)) installs from the wheel and refuses a breaking commit, passes it announced, skips one with no connector file ($(( SECONDS - t0 )) s)"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  check) shift; check "$@" ;;
  hook) shift; hook_check "$(realpath "${1:?wheel.sh hook WHEEL}")" ;;
  -h|--help) sed -n '2,20p' "$0" ;;
  "") build; check target/wheels/*.whl ;;
  *) echo "wheel.sh: unknown command $1 (build, check, or nothing for both)" >&2; exit 2 ;;
esac
