#!/usr/bin/env bash
# Throughput of Mooncake Transfer Engine's TCP transport on 127.0.0.1: the real engine (pip
# mooncake-transfer-engine-non-cuda, pinned) against itself, the reference peer's Rust transport against itself,
# and each against the other; warm 1 MiB and 64 MiB writes. Opt-in (not part of ./scripts/test.sh).
# Usage: scripts/engine-bench.sh [PYTHON]   (default .venv/bin/python; scripts/engine-venv.sh installs the engine)
# Built with the test profile (opt-level 1, Cargo.toml), like the rest of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export MOONCAKE_PYTHON="${1:-$PWD/.venv/bin/python}"
./scripts/engine-venv.sh "$MOONCAKE_PYTHON"
cargo test -p mooncake-reference --test suite -- --ignored --nocapture engine_interop::throughput 2>&1 | grep -E '^(BENCH|SKIPPED|test result)'
