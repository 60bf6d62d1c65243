#!/usr/bin/env bash
# The whole test suite, as CI runs it: sets up the pinned Python oracle venv (msgspec, pyzmq), runs every
# Rust test, checks every bundled vector and trace with the CLI, prints the wire diff when spec/ changed
# relative to the main branch, and prints one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Each step says when it starts (seconds since the start), so a CI log shows where the time goes.
step() { echo "== $* (at $(( $(date +%s) - start ))s)"; }

# 1. Python venv with the pinned cross-implementation oracle (idempotent).
step "Python oracle venv"
MOONCAKE_PYTHON=$(./scripts/oracle-venv.sh)
export MOONCAKE_PYTHON
# The pinned Mooncake Transfer Engine for the real-engine interop tests (they print SKIPPED when it is missing).
step "Transfer Engine package in .venv"
./scripts/engine-venv.sh "$MOONCAKE_PYTHON"

# 2. Every Rust test in the workspace (unit, integration, differential against msgspec, generated files).
step "cargo fmt --check (rustfmt.toml; the fuzz and bench workspaces too)"
for dir in . fuzz bench; do
  (cd "$dir" && cargo fmt --all --check > /dev/null) || { (cd "$dir" && cargo fmt --all --check | head -40); echo "SUMMARY: not formatted (run: cargo fmt --all, also in fuzz/ and bench/)"; exit 1; }
done

# The fuzz and bench workspaces are built by their own scripts with --locked: their lock files must follow
# the workspace's dependencies (they went stale twice when a crate's dependencies changed).
for dir in fuzz bench; do
  (cd "$dir" && cargo metadata --locked --format-version 1 > /dev/null 2>&1) || { echo "SUMMARY: $dir/Cargo.lock is stale (run: cd $dir && cargo metadata --format-version 1 > /dev/null, and commit it)"; exit 1; }
done

mkdir -p target
# No incremental caches for a one-shot run (they doubled the target directory of a clean clone).
export CARGO_INCREMENTAL=0

step "cargo clippy, warnings denied (the workspace's [lints] in Cargo.toml)"
cargo clippy --workspace --all-targets --locked --quiet -- -D warnings > target/clippy.txt 2>&1 || { head -80 target/clippy.txt; echo "SUMMARY: clippy FAILED (cargo clippy --workspace --all-targets -- -D warnings)"; exit 1; }

step "cargo doc, warnings denied (broken or private intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet > target/doc.txt 2>&1 || { head -60 target/doc.txt; echo "SUMMARY: cargo doc FAILED (RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps)"; exit 1; }

step "cargo test"
set +e
# Eight test threads: most of the conformance suite's time is spent waiting on the timers of the scenarios it
# plays (its tests use about a fifth of the wall time in CPU), so more threads than the 2 cores finish sooner.
cargo test --workspace --locked -- --show-output --test-threads=8 > target/test-output.txt 2>&1
status=$?
set -e
grep -E '^test result|panicked|^error' target/test-output.txt || true
if [ $status -ne 0 ]; then
  grep -E -A20 '^failures:' target/test-output.txt | head -80 || true
  echo "SUMMARY: cargo test FAILED (exit $status; full output in target/test-output.txt)"; exit 1
fi
passed=$(grep -oE '^test result: ok\. [0-9]+ passed' target/test-output.txt | awk '{s+=$4} END {print s}')
# Tests that need something optional (the vLLM wheel cache) and found it missing pass after printing
# `SKIPPED: <what> — <why>`; they are counted in the summary line.
skipped=$(grep -c '^SKIPPED: ' target/test-output.txt || true)
grep '^SKIPPED: ' target/test-output.txt || true
# The round-trip benchmark is not a test, but it must keep building (with the test profile and the whole workspace
# selected, so that it reuses the test build's artifacts: `-p mooncake-reference` alone resolves its dependencies'
# features differently and compiles two crates again).
cargo build --quiet --locked --profile test --workspace --benches || { echo "SUMMARY: the round-trip bench does not build"; exit 1; }
# The fuzz targets' bodies over their seeds and derived inputs, and the short differential fuzzing run against
# msgspec (fuzz/harness/tests), ran above (`--show-output` keeps what passing tests print); their results:
grep -E '^(differential fuzzing:|(decode_spec|decode_typed|trace|bootstrap|store_keys|prefiller|decoder): .* every invariant held)' target/test-output.txt || true

# 2b. Every crate packages (`cargo package`: versions on the path dependencies, every embedded file inside its
#     crate). Building the packaged crates from their tarballs is scripts/package-check.sh (minutes; not here).
step "cargo package (every published crate, without the verify build)"
cargo package --workspace --exclude mooncake-fuzz-harness --no-verify --locked --allow-dirty > target/package.txt 2>&1 \
  || { grep -v '^warning: manifest has no' target/package.txt | tail -20; echo "SUMMARY: cargo package FAILED"; exit 1; }
grep -E '^ *Packaged' target/package.txt | sed 's/^ */cargo package: /'

# 3. The independent Python peer's own self-check (its scenarios between Python testees, its planner against
#    vLLM's golden plan vectors).
step "tests/peer self-check"
"$MOONCAKE_PYTHON" tests/peer/test_peer_selfcheck.py > target/peer-selfcheck.txt 2>&1 || { tail -30 target/peer-selfcheck.txt; echo "SUMMARY: Python peer self-check FAILED"; exit 1; }
tail -3 target/peer-selfcheck.txt

# 3b. The recorder's trace comparison (tools/record/compare.py; standard library only, no vLLM needed).
step "tools/record compare self-check"
python3 tools/record/test_compare.py > target/record-compare.txt 2>&1 || { cat target/record-compare.txt; echo "SUMMARY: recorder compare self-check FAILED"; exit 1; }
tail -1 target/record-compare.txt

# 3c. The Mooncake connector driver's self-check (tools/mooncake_v1; standard library only: its memory at the
# runner's addresses, the provenance pattern, its answers without the connector installed; about 2 s).
step "tools/mooncake_v1 driver self-check"
python3 tools/mooncake_v1/test_testee.py > target/mooncake-v1-selfcheck.txt 2>&1 || { cat target/mooncake-v1-selfcheck.txt; echo "SUMMARY: Mooncake connector driver self-check FAILED"; exit 1; }
tail -1 target/mooncake-v1-selfcheck.txt

# 3d. The vllm-ascend recorder's self-check (tools/ascend; standard library only: the merge of the workers' events
# into one pull trace, a worker without its stack failing with exit 3; about 1 s).
step "tools/ascend recorder self-check"
python3 tools/ascend/test_record.py > target/ascend-selfcheck.txt 2>&1 || { cat target/ascend-selfcheck.txt; echo "SUMMARY: vllm-ascend recorder self-check FAILED"; exit 1; }
grep '^SKIPPED' target/ascend-selfcheck.txt || true
tail -1 target/ascend-selfcheck.txt

# 3e. The vllm-ascend testee driver's self-check (tools/ascend/testee.py; standard library only: the runner's
# addresses mapped onto the worker's regions, commands and status mapped onto the worker's, its answers without
# torch installed; about 1 s).
step "tools/ascend testee self-check"
python3 tools/ascend/test_testee.py > target/ascend-testee-selfcheck.txt 2>&1 || { cat target/ascend-testee-selfcheck.txt; echo "SUMMARY: vllm-ascend testee self-check FAILED"; exit 1; }
grep '^SKIPPED' target/ascend-testee-selfcheck.txt || true
tail -1 target/ascend-testee-selfcheck.txt

# 4. The CLI over every bundled vector and trace, and the conformance run against the reference peer.
step "mooncake-conformance vectors / validate"
bin=target/debug/mooncake-conformance
$bin vectors conformance/vectors | tail -1
$bin validate conformance/traces | tail -1
$bin validate conformance/traces-pull | tail -1
$bin run --progress off | tail -2

# 4'. The compatibility matrix, observed (every ordered pair of revisions, every common scenario, reference
#     peers over 127.0.0.1): it must agree with `diff` and with the committed schema/push/compat-matrix.md.
step "compatibility matrix"
$bin matrix --check schema/push/compat-matrix.md > target/matrix.txt 2> target/matrix-progress.txt || {
  sed -n '/^## Disagreements/,$p' target/matrix.txt | head -30; grep -i stale target/matrix-progress.txt; tail -1 target/matrix.txt
  echo "SUMMARY: compatibility matrix FAILED (regenerate: mooncake-conformance matrix --out schema/push/compat-matrix.md)"; exit 1; }
tail -1 target/matrix.txt

# 4a. The programs as users install them (in a bin directory of their own, each package checked to build alone as
#     `cargo install` builds it; the wheel in a fresh venv with no Rust; the pre-commit hook from the wheel), run
#     with the source tree hidden from an empty directory: the same cases must pass. Reuses the test build
#     (scripts/install-check.sh).
step "installed programs: the binaries, the wheel, the pre-commit hook"
./scripts/install-check.sh "$bin" > target/install-check.txt 2>&1 || { cat target/install-check.txt; echo "SUMMARY: install check FAILED"; exit 1; }
grep -E '^(install-check: mooncake-reference builds|wheel: mooncake_wire|wheel: installed into|installed: OK|wheel: OK|wheel: the pre-commit hook)' target/install-check.txt
# Where mount namespaces are not allowed, the installed programs run with the tree in place (SKIPPED lines).
grep '^SKIPPED: ' target/install-check.txt || true
skipped=$(( skipped + $(grep -c '^SKIPPED: ' target/install-check.txt || true) ))

# 4b. The real-store gate: a mooncake_master on 127.0.0.1 and the package's store client (installs the pinned
#     package on first use; skips only when it cannot be installed).
step "real store gate"
if ./scripts/store-gate.sh "$MOONCAKE_PYTHON" "$bin" > target/store-gate.txt; then tail -1 target/store-gate.txt; else cat target/store-gate.txt; echo "SUMMARY: store gate FAILED"; exit 1; fi
# A part of the gate that the installed package cannot run (0.34.0's batch_probe_key) says SKIPPED; count it.
grep '^SKIPPED: ' target/store-gate.txt || true
skipped=$(( skipped + $(grep -c '^SKIPPED: ' target/store-gate.txt || true) ))
# 4b'. The 1-minute soak: a bootstrap server, 4 prefillers and 64 decoders as processes on 127.0.0.1 under pulls
#      and random faults, then an accounting of every pull on both sides (scripts/soak.sh; RELIABILITY.md).
step "soak (1 minute)"
MOONCAKE_SOAK_NICE=0 MOONCAKE_SOAK_PROFILE=test ./scripts/soak.sh --minutes 1 --out target/soak > target/soak.txt 2>&1 || { grep -E 'VIOLATION|soak' target/soak.txt | head -30; echo "SUMMARY: soak FAILED (results in target/soak)"; exit 1; }
tail -1 target/soak.txt

# 4c. Optional: every cargo-fuzz target for a few seconds (coverage-guided libFuzzer; builds on stable, needs
#     cargo-fuzz and a few minutes for the build; FUZZING.md). MOONCAKE_FUZZ_SMOKE=<seconds per target>.
if [ -n "${MOONCAKE_FUZZ_SMOKE:-}" ]; then
  step "cargo-fuzz smoke run (${MOONCAKE_FUZZ_SMOKE}s per target)"
  ./scripts/fuzz-smoke.sh -time "$MOONCAKE_FUZZ_SMOKE" || { echo "SUMMARY: cargo-fuzz smoke run FAILED"; exit 1; }
fi

# 5. When spec/ differs from the main branch, the wire diff of each changed revision (informational; a no-op
#    without git history, a main branch or a change; $SPEC_DIFF_BASE names the branch, else origin/main or main).
step "spec diff against the main branch"
$bin diff --spec-changes ${SPEC_DIFF_BASE:+--base "$SPEC_DIFF_BASE"} | tee target/spec-diff.md || { echo "SUMMARY: diff --spec-changes FAILED (a changed revision of spec/ does not load)"; exit 1; }

# The mutation suite (conformance/CHECKS.md § Mutation suite): faults caught per role.
mutation=$(grep -oE '^MUTATION SUITE: [a-z]+ [0-9]+/[0-9]+' target/test-output.txt | awk '{printf "%s%s %s", sep, $3, $4; sep=", "}')
grep '^MUTATION SUITE: ' target/test-output.txt || true
skip_note=""
[ "$skipped" -eq 0 ] || skip_note=" (${skipped} skipped for a missing optional input: see the SKIPPED lines above)"
echo "SUMMARY: ${passed} Rust tests passed${skip_note}; mutation suite: ${mutation:-not run} faults caught; vectors and traces OK; $(( $(date +%s) - start ))s"
