#!/usr/bin/env bash
# Golden plan vectors of a vLLM release, computed by that release's own planning code read out of its wheel.
#
#   scripts/gen-plan-vectors.sh --release X [--seed N] [--out DIR] [--python PY] [--no-download]
#   scripts/gen-plan-vectors.sh --release X --verify FILE...      # recompute golden files of release X
#   scripts/gen-plan-vectors.sh --release X --changed-since W     # the code that differs from release W's
#
# Writes DIR/plan/build_transfer_params_X.jsonl and, for a release that has them (0.34.0 on),
# normalize_paired_block_order_X.jsonl and contiguous_runs_X.jsonl (default DIR: the bundled conformance/vectors;
# format: conformance/vectors/GOLDEN.md). With the bundled seed (20260534, the default) the bundled files are
# rewritten byte for byte. Needs numpy (vLLM's planner computes with it) in PY: --python PY, else the repository's
# .venv, else python3; `.venv/bin/pip install numpy` adds it. vLLM and torch are never installed or imported.
# Wheels as for scripts/gen-vectors.sh ($MOONCAKE_WHEEL_CACHE, default ~/.cache/mooncake-wire/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
python="" args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --release|--seed|--out|--changed-since) args+=("$1" "$2"); shift 2 ;;
    --verify) args+=("$1"); shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do args+=("$1"); shift; done ;;
    --no-download) args+=("$1"); shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "gen-plan-vectors.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
"$python" -c 'import numpy' 2>/dev/null || {
  echo "gen-plan-vectors.sh: $python has no numpy (\`$python -m pip install numpy\`, or pass --python)" >&2; exit 2; }
exec "$python" tools/vectors/plan_vectors.py --pip-python "$python" "${args[@]}"
