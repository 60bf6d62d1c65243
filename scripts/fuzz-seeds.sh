#!/usr/bin/env bash
# Builds the seed corpora of the fuzz targets from conformance/vectors, conformance/traces and spec/ (the
# generator is fuzz/harness/src/seeds.rs):
#   scripts/fuzz-seeds.sh           every seed to fuzz/corpus/<target>/ (the working corpus; not committed)
#   scripts/fuzz-seeds.sh --update  also rewrites the committed small seed set fuzz/seeds/<target>/ and the
#                                   dictionaries fuzz/dict/*.dict (run it after a spec or vectors change)
set -euo pipefail
cd "$(dirname "$0")/.."
run() { cargo run --quiet --locked -p mooncake-fuzz-harness --bin fuzz-seeds -- "$@"; }
if [ "${1:-}" = "--update" ]; then
  rm -rf fuzz/seeds
  run --small 24 --dict fuzz/dict fuzz/seeds
fi
run fuzz/corpus
