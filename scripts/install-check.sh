#!/usr/bin/env bash
# The binaries as users install them: `cargo install --path conformance` and `cargo install --path
# reference-impl` from a copy of the source tree into a temporary root, the copy then deleted, and the installed
# mooncake-conformance run from an empty directory. It must run the same cases as the binary of this tree
# (bundled traces, scenarios and expected failures are embedded), and pass them; `--testee` with the installed
# mooncake-peer must pass too. Reuses the test build's artifacts (`--profile test`, this target directory), so
# only the workspace's own crates are compiled again. The Python wheel is built from the same copy and checked
# after the installed binaries (scripts/wheel.sh build --src, check).
#
# Usage: scripts/install-check.sh [TREE_BINARY]          install, then check (default target/debug/mooncake-conformance)
#        scripts/install-check.sh --build DIR            only install, into DIR
#                                                        (to check one build more than once)
#        scripts/install-check.sh --check DIR [TREE_BINARY]  only check what --build installed into DIR
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
mode=all
case "${1:-}" in
  --build|--check) mode=${1#--}; tmp=$(realpath "$2"); shift 2 ;;
  *) tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT ;;
esac
tree_bin=$(realpath "${1:-target/debug/mooncake-conformance}")

install_both() {
  mkdir -p "$tmp/src"
  # The tree as a clone would have it (tracked and new files, nothing ignored).
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && { mkdir -p "$tmp/src/$(dirname "$f")"; cp -p "$f" "$tmp/src/$f"; }
  done
  for pkg in conformance reference-impl; do
    cargo install --quiet --locked --profile test --path "$tmp/src/$pkg" --root "$tmp/root" 2> "$tmp/install-$pkg.txt" \
      || { cat "$tmp/install-$pkg.txt"; echo "install-check: cargo install --path $pkg FAILED"; exit 1; }
  done
  # The Python wheel from the same copy (it reuses what the two installs just built), checked below.
  "$repo/scripts/wheel.sh" build --src "$tmp/src" --out "$tmp/wheels"
  rm -rf "$tmp/src"
}

if [ "$mode" != check ]; then install_both; fi
[ "$mode" = build ] && { echo "install-check: installed into $tmp/root"; exit 0; }
[ -x "$tmp/root/bin/mooncake-conformance" ] || { echo "install-check: nothing installed in $tmp/root (run --build first)"; exit 1; }
mkdir -p "$tmp/empty"
cd "$tmp/empty"
installed="$tmp/root/bin/mooncake-conformance"
want=$("$tree_bin" run --list | sed -n '/^$/q;p' | wc -l)
got=$("$installed" run --list | sed -n '/^$/q;p' | wc -l)
if [ "$want" != "$got" ] || [ "$got" -eq 0 ]; then
  echo "install-check: the installed binary lists $got cases, the tree's $want"; exit 1
fi
summary=$("$installed" run --progress off | tail -1)
echo "installed, from an empty directory: $summary"
case "$summary" in *"conformance: $want cases"*"— OK") ;; *) echo "install-check: the installed run did not pass $want cases"; exit 1 ;; esac
peer="$tmp/root/bin/mooncake-peer"
summary=$("$installed" run --progress off --case vllm-0.33.0/a_single_success --testee "'$peer' --log error testee" | tail -1)
echo "installed, with the installed mooncake-peer as testee: $summary"
case "$summary" in *"— OK") ;; *) echo "install-check: the installed mooncake-peer did not pass"; exit 1 ;; esac
# extract runs its embedded script: no tools/ directory is needed. A gen-1 request written from the spec's facts.
mkdir -p "$tmp/py"
printf 'import msgspec\n\nReqId = str\n\n\nclass MooncakeAgentMetadata(msgspec.Struct, omit_defaults=True, dict=True):\n    remote_hostname: str\n    remote_port: int\n    request_ids: list[ReqId]\n    kv_caches_base_addr: list[int]\n    block_ids: list[list[int]]\n' > "$tmp/py/proto.py"
line=$("$installed" extract "$tmp/py/proto.py" --format summary 2>/dev/null) || { echo "install-check: the installed extract failed"; exit 1; }
echo "installed extract, from an empty directory: $line"
# The file holds the struct only: its wire fingerprint is 0.13.0's; the config key and environment variables that
# vLLM's connector file reads (and this one does not) are the edits.
case "$line" in *"closest bundled revision vllm-0.13.0..0.15.1, "*"wire fingerprint 9d4e3ba94b2e8fad"*) ;; *) echo "install-check: extract did not derive vllm-0.13.0..0.15.1's wire"; exit 1 ;; esac
[ -z "$(ls -A "$tmp/empty")" ] || { echo "install-check: the run left files in the working directory"; ls -A "$tmp/empty"; exit 1; }
echo "install-check: OK ($got cases, same as the tree)"
# The wheel, installed into a fresh venv with no Rust on PATH, from an empty directory of its own.
"$repo/scripts/wheel.sh" check "$tmp"/wheels/*.whl "$tree_bin"
