#!/usr/bin/env bash
# Soak test of the reference peer: a bootstrap server, 4 prefillers and 64 decoders (each a mooncake-peer
# process on 127.0.0.1) under steady pulls and random faults for N minutes, then an accounting of every pull on
# both sides, the tables, the bytes that landed, RSS and open fds (tools/soak/soak.py says exactly what).
#
#   scripts/soak.sh [--minutes N] [any option of tools/soak/soak.py: --revision, --decoders, --rate, --seed,
#                   --out DIR, --sabotage outcome|memory ...]                        default: 1 minute
#
# Results: DIR/summary.json, DIR/samples.csv (RSS and fds of every process every 2 s) and DIR/rss.svg (default
# DIR: target/soak). Exit 0 when the accounting holds, 1 when it does not, 3 when the environment is missing
# (the peer binary, pyzmq). Builds mooncake-peer first (debug). Runs the peers at
# `nice -n 10` unless MOONCAKE_SOAK_NICE says otherwise. scripts/test.sh runs the 1-minute version.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${MOONCAKE_PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python3
"$python" -c 'import zmq' 2>/dev/null || { echo "soak: pyzmq missing for $python (python3 -m venv .venv && .venv/bin/pip install -r tests/oracle/requirements.txt)"; exit 3; }
# MOONCAKE_SOAK_PROFILE=test (scripts/test.sh) reuses the test suite's build instead of a dev build of its own: the
# same targets as `cargo test --workspace` (built alone, mooncake-reference resolves its dependencies' features
# differently and two crates would compile again).
what=(-p mooncake-reference --bin mooncake-peer)
[ -z "${MOONCAKE_SOAK_PROFILE:-}" ] || what=(--profile "$MOONCAKE_SOAK_PROFILE" --workspace --lib --bins --tests)
cargo build --quiet --locked "${what[@]}" || { echo "soak: mooncake-peer does not build"; exit 3; }
exec nice -n "${MOONCAKE_SOAK_NICE:-10}" "$python" tools/soak/soak.py "$@"
