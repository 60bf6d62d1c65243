#!/usr/bin/env bash
# The programs as users install them: `mooncake-conformance` and `mooncake-peer` in a bin directory of their own (as
# `cargo install` puts them), and the Python wheel (scripts/wheel.sh) in a fresh venv, both checked from an empty
# directory with the source tree hidden (scripts/lib/installed.sh: a private mount namespace with an empty tmpfs
# over the tree), so a program that read anything of the tree at run time fails. They must list the same cases as
# the binary of this tree (bundled traces, scenarios and expected failures are embedded) and pass them; `--testee`
# with the installed mooncake-peer must pass too. The programs are the test build's. What `cargo install --path`
# adds, each package built alone (its dependencies' features resolved for it alone), is the wheel's build for
# mooncake-conformance (maturin builds that one package; it links the test build's artifacts, seconds, as long as
# the package alone resolves its dependencies' features as the workspace does: scripts/lib/feature_drift.py, run by
# wheel.sh, fails first when they drift apart) and `cargo check -p mooncake-reference` for the other (seconds).
# How the crates build as published, from their tarballs: `cargo package` in the test command and
# scripts/package-check.sh.
#
# Usage: scripts/install-check.sh [TREE_BINARY]          install, then check (default target/debug/mooncake-conformance)
#        scripts/install-check.sh --build DIR            only install, into DIR
#                                                        (to check one build more than once)
#        scripts/install-check.sh --check DIR [TREE_BINARY]  only check what --build installed into DIR
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. scripts/lib/installed.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
mode=all
case "${1:-}" in
  --build|--check) mode=${1#--}; tmp=$(realpath "$2"); shift 2 ;;
  *) tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT ;;
esac
tree_bin=$(realpath "${1:-target/debug/mooncake-conformance}")

install_both() {
  local t0=$SECONDS pkg
  # mooncake-conformance's package is built alone by the wheel's build below (maturin builds that package only).
  cargo check --quiet --locked --profile test -p mooncake-reference --bins 2> "$tmp/check.txt" \
    || { cat "$tmp/check.txt"; echo "install-check: mooncake-reference does not build alone (as cargo install builds it)"; exit 1; }
  mkdir -p "$tmp/root/bin"
  cp "$CARGO_TARGET_DIR/debug/mooncake-conformance" "$CARGO_TARGET_DIR/debug/mooncake-peer" "$tmp/root/bin/"
  echo "install-check: mooncake-reference builds alone (cargo check -p, $(( SECONDS - t0 )) s); the test build's programs installed"
  "$repo/scripts/wheel.sh" build --out "$tmp/wheels"
}

if [ "$mode" != check ]; then install_both; fi
[ "$mode" = build ] && { echo "install-check: installed into $tmp/root"; exit 0; }
[ -x "$tmp/root/bin/mooncake-conformance" ] || { echo "install-check: nothing installed in $tmp/root (run --build first)"; exit 1; }
want=$("$tree_bin" run --list | sed -n '/^$/q;p' | wc -l)
# The wheel runs every case (the install users are pointed to first); the cargo-installed runner, the same build,
# lists them and passes one. extract finds python3 on PATH.
without_tree "$repo" "installed_checks command_in" \
  installed_checks installed "$want" 0 /usr/local/bin:/usr/bin:/bin \
  env -i HOME="$tmp" PATH="$tmp/root/bin:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8
# The wheel, installed into a fresh venv with no Rust on PATH, from an empty directory of its own.
"$repo/scripts/wheel.sh" check "$tmp"/wheels/*.whl "$tree_bin"
