#!/usr/bin/env bash
# The crates as crates.io would hold them. Packages every published crate of the workspace and builds each from
# its own tarball, in dependency order, against the others' tarballs (`cargo package` with its verify build: what
# `cargo publish` would check); then unpacks the tarballs into a workspace of their own (each crate's dependencies
# on the others patched to the unpacked copies, the versions of everything else from this repository's
# Cargo.lock) and runs every crate's tests there, with no file of this repository in reach. Prints each crate's
# result and one summary line. Takes many minutes on 2 cores (everything is built twice more, under
# target/package-verify and target/package-tests); the test command runs the packaging only (`--no-verify`). Opt-in; not
# part of ./scripts/test.sh.
#
# Usage: scripts/package-check.sh [--no-tests]
# Exit codes: 0 every crate packaged, built and passed its tests from its tarball; 1 a crate failed; 2 bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tests=1
case "${1:-}" in
  --no-tests) tests=0 ;;
  "") ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "package-check.sh: unknown argument $1" >&2; exit 2 ;;
esac
start=$SECONDS
export CARGO_INCREMENTAL=0
# The verify build gets the workspace's crates from a temporary local registry, and cargo extracts a registry's
# crate once per version (under $CARGO_HOME/registry/src/, in a directory named after the registry's path hash,
# `-<hash>` for a local one) and reuses it: an earlier run's mooncake-wire 0.1.0 was built instead of this tree's
# (seen: "no `BehaviourKey` in `spec`"). None of these crates is on a public registry, so every such copy is ours.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/mooncake-*
# Nor does cargo rebuild a registry crate it has built before (a registry's crate of one version counts as
# immutable): with the workspace's target directory, the verify build of mooncake-trace linked an earlier run's
# build of mooncake-wire 0.1.0 (seen: "cannot find `Implementation` in `spec`"). So the verify build has a target
# directory of its own, where this workspace's crates' builds are removed first (everything else stays cached).
verify="$repo/target/package-verify"
rm -rf "$verify"/debug/.fingerprint/mooncake-* "$verify"/debug/deps/*mooncake* "$verify"/debug/build/mooncake-*
CARGO_TARGET_DIR="$verify" cargo package --workspace --exclude mooncake-fuzz-harness --locked --allow-dirty
echo "package-check: every crate packaged and built from its tarball in $(( SECONDS - start )) s"
[ "$tests" = 1 ] || exit 0

# The tarballs' own workspace, outside this repository (a test that reached for a file of the repository through
# a relative path would find it otherwise).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
crates=()
for c in "$verify"/package/*.crate; do
  tar -xzf "$c" -C "$work"
  crates+=("$(basename "$c" .crate)")
done
# The tarballs' files carry fixed times, older than what an earlier run built from them: without new times cargo
# would take that build as fresh (seen: a test binary of the previous tarball ran).
find "$work" -type f -exec touch {} +
{
  echo '[workspace]'
  printf 'members = [%s]\n' "$(printf '"%s", ' "${crates[@]}" | sed 's/, $//')"
  echo 'resolver = "2"'
  echo '[patch.crates-io]'
  for c in "${crates[@]}"; do echo "${c%-*} = { path = \"$c\" }"; done
} > "$work/Cargo.toml"
cp Cargo.lock "$work/Cargo.lock"
# The conformance crate's tests drive the built-in testee, `mooncake-peer`, found on PATH: built from its tarball.
(cd "$work" && CARGO_TARGET_DIR="$repo/target/package-tests" cargo build --quiet -p mooncake-reference --bin mooncake-peer) \
  || { echo "package-check: mooncake-peer does not build from its tarball"; exit 1; }
export PATH="$repo/target/package-tests/debug:$PATH"
failed=()
for c in "${crates[@]}"; do
  t0=$SECONDS
  # The wire crate's tests use its test helpers and its generator (its `testing` and `generate` features, which the
  # repository's manifest turns on through a path dev-dependency on itself that packaging drops).
  features=(); [ "${c%-*}" = mooncake-wire ] && features=(--features testing,generate)
  # `--show-output` keeps the `SKIPPED:` lines of the tests that need the rest of the repository; counted below.
  if (cd "$work" && CARGO_TARGET_DIR="$repo/target/package-tests" cargo test -p "${c%-*}" "${features[@]}" -- --show-output > "$work/$c.log" 2>&1); then
    grep '^SKIPPED: ' "$work/$c.log" | sort | uniq -c | sed 's/^/  /' || true
    echo "package-check: ${c%-*} from its tarball: $(grep -oE '^test result: ok\. [0-9]+ passed' "$work/$c.log" | awk '{s+=$4} END {print s+0}') tests passed, $(grep -c '^SKIPPED: ' "$work/$c.log" || true) skipped (the SKIPPED lines above) ($(( SECONDS - t0 )) s)"
  else
    grep -E '^(test .* FAILED|error)' "$work/$c.log" | head -20 || true
    cp "$work/$c.log" "$repo/target/package-tests-$c.log"
    echo "package-check: ${c%-*} from its tarball FAILED (log: target/package-tests-$c.log)"
    failed+=("${c%-*}")
  fi
done
if [ ${#failed[@]} -eq 0 ]; then
  echo "package-check: OK — ${#crates[@]} crates packaged, built and tested from their tarballs in $(( SECONDS - start )) s"
else
  echo "package-check: FAILED — ${failed[*]} ($(( SECONDS - start )) s)"; exit 1
fi
