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
#                                                 opt-level 1 is what `cargo test` and `install-check.sh` built);
#                                                 --release is the distribution build. --src builds from a copy
#                                                 of the tree (install-check.sh's, deleted before the check)
#        scripts/wheel.sh check WHEEL [TREE_BINARY]
#                                                 TREE_BINARY (default target/debug/mooncake-conformance) gives the
#                                                 case count to compare with
# A --release wheel's tag is what this machine's glibc allows (manylinux_2_35 on Debian 12); an older tag needs a
# manylinux build image (README, "Install"). scripts/install-check.sh (in scripts/test.sh) runs build and check.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

tools() {
  local t=$repo/target/wheel-tools want
  want=$(sed -n 's/^maturin==//p' tools/wheel/requirements.txt)
  if ! "$t/bin/maturin" --version 2>/dev/null | grep -q "$want"; then
    python3 -m venv "$t"
    "$t/bin/pip" install --quiet --disable-pip-version-check -r tools/wheel/requirements.txt
  fi
  echo "$t/bin"
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
  # The test profile's settings under the `dev` name: maturin builds with `cargo rustc`, where `--profile test`
  # would mean a test harness; the same settings reuse the artifacts already built.
  [ "$profile" = dev ] && export CARGO_PROFILE_DEV_OPT_LEVEL=1
  cd "$src"
  # mooncake-peer goes in as a data script (maturin's bin bindings take one package's programs).
  cargo build --quiet --locked --profile "$profile" -p mooncake-reference --bin mooncake-peer
  rm -rf target/wheel-data "$out"
  mkdir -p target/wheel-data/scripts
  cp "$CARGO_TARGET_DIR/$([ "$profile" = release ] && echo release || echo debug)/mooncake-peer" target/wheel-data/scripts/
  "$bin/maturin" build --quiet --locked --profile "$profile" --out "$out" > "$out.log" 2>&1 \
    || { cat "$out.log"; echo "wheel: maturin build FAILED"; exit 1; }
  local wheel tag
  wheel=$(ls "$out"/*.whl)
  tag=$("$bin/auditwheel" show "$wheel" 2>&1 | tr '\n' ' ' | grep -oE 'platform tag: "[^"]+"' | head -1 || true)
  echo "wheel: $(basename "$wheel"), $(( $(stat -c %s "$wheel") / 1024 / 1024 )) MiB, built in $(( SECONDS - t0 )) s; auditwheel: ${tag:-no tag reported}"
}

check() {
  local wheel tree_bin
  wheel=$(realpath "${1:?wheel.sh check WHEEL}")
  tree_bin=$(realpath "${2:-target/debug/mooncake-conformance}")
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
  mkdir -p "$tmp/empty" && cd "$tmp/empty"
  run() { "${clean_env[@]}" "$@"; }
  want=$("$tree_bin" run --list | sed -n '/^$/q;p' | wc -l)
  got=$(run mooncake-conformance run --list | sed -n '/^$/q;p' | wc -l)
  [ "$want" = "$got" ] && [ "$got" -gt 0 ] || { echo "wheel: the installed runner lists $got cases, the tree's $want"; exit 1; }
  summary=$(run mooncake-conformance run --progress off | tail -1)
  echo "wheel, installed, from an empty directory: $summary"
  case "$summary" in *"conformance: $want cases"*"— OK") ;; *) echo "wheel: the installed run did not pass $want cases"; exit 1 ;; esac
  summary=$(run mooncake-conformance run --progress off --case vllm-0.33.0/a_single_success --testee "mooncake-peer --log error testee" | tail -1)
  case "$summary" in *"— OK") echo "wheel, the installed mooncake-peer as testee: $summary" ;; *) echo "wheel: the installed mooncake-peer did not pass: $summary"; exit 1 ;; esac
  run python -m mooncake_wire --version | grep -q '^mooncake-conformance ' || { echo "wheel: python -m mooncake_wire does not run the runner"; exit 1; }
  run python -m mooncake_wire peer --help > /dev/null || { echo "wheel: python -m mooncake_wire peer --help failed"; exit 1; }
  run mooncake-peer --help > /dev/null || { echo "wheel: mooncake-peer --help failed"; exit 1; }
  # extract's default interpreter is the venv's own python3 (no MOONCAKE_PYTHON, and none on the clean PATH would
  # do: the venv's is found next to the program). A generation-1 request written from the spec's facts.
  printf 'import msgspec\n\nReqId = str\n\n\nclass MooncakeAgentMetadata(msgspec.Struct, omit_defaults=True, dict=True):\n    remote_hostname: str\n    remote_port: int\n    request_ids: list[ReqId]\n    kv_caches_base_addr: list[int]\n    block_ids: list[list[int]]\n' > proto.py
  line=$(env -i HOME="$tmp" PATH=/nonexistent "$tmp/venv/bin/mooncake-conformance" extract proto.py --format summary 2> extract.err) \
    || { cat extract.err; echo "wheel: the installed extract failed with no python3 on PATH"; exit 1; }
  case "$line" in *"closest bundled revision vllm-0.13.0..0.15.1, "*"wire fingerprint 9d4e3ba94b2e8fad"*) ;; *) echo "wheel: extract did not derive vllm-0.13.0..0.15.1's wire: $line"; exit 1 ;; esac
  echo "wheel, installed extract with the venv's Python: $line"
  echo "wheel: OK ($got cases, same as the tree)"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  check) shift; check "$@" ;;
  -h|--help) sed -n '2,19p' "$0" ;;
  "") build; check target/wheels/*.whl ;;
  *) echo "wheel.sh: unknown command $1 (build, check, or nothing for both)" >&2; exit 2 ;;
esac
