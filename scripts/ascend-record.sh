#!/usr/bin/env bash
# vllm-ascend's own Mooncake pull connector (kv_p2p/mooncake_connector.py of its source distribution) recorded as
# pull-family traces: prefiller and decoder workers as separate processes on 127.0.0.1, the real Mooncake Transfer
# Engine over TCP moving the KV bytes, torch_npu and the device/parallel-state lookups faked (tools/ascend/README.md).
# Opt-in (not part of ./scripts/test.sh).
#
#   scripts/ascend-record.sh [--release R]... [--scenario NAME]... [--out DIR] [--python PY] [--log-dir DIR]
#                            [--no-validate]
#
#   --release    vllm-ascend release: 0.18.0, 0.23.0.post1 (default: both)
#   --scenario   a_meta_then_done, b_two_decoders, c_failed_read (default: all)
#   --out        writes OUT/vllm-ascend-<release>/<scenario>.jsonl (default: recordings/ascend, git-ignored);
#                conformance/traces-pull re-records the bundled traces
#   --python     an environment with torch and vLLM's dependencies (default: the recorder's, as record.sh makes it)
#   --no-validate  skip `mooncake-conformance validate` of what was written
#
# Environment: the recorder's ($MOONCAKE_RECORD_CACHE/venv, default ~/.cache/mooncake-wire/record/venv), with the
# vLLM release each vllm-ascend release pairs with (0.18.0 → vLLM 0.18.0, 0.23.0.post1 → vLLM 0.23.0; pip --no-deps
# --target, compiled kernels removed) and the engine package next to it; the sdists in ~/.cache/mooncake-wire/ascend
# (fetched once: pip cannot download them without building them, so the file pip finds is fetched directly and its
# sha256 checked). About 1.2 GB of wheels the first time, 30–40 s per scenario.
#
# Exit status: 0 every scenario recorded, its pulled blocks checked and (unless --no-validate) validated;
# 1 a scenario failed or a trace has findings (written all the same, with `error` set); 2 bad usage;
# 3 the environment cannot be made or the workers cannot start.
#
# Example: scripts/ascend-record.sh --release 0.18.0 --out /tmp/ascend && \
#          mooncake-conformance validate /tmp/ascend
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record-env.sh
. scripts/lib/ascend-env.sh
cache="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}"
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
sdists="${MOONCAKE_ASCEND_CACHE:-$HOME/.cache/mooncake-wire/ascend}"
releases=() scenarios=() out=recordings/ascend python="" log_dir="" validate=1
while [ $# -gt 0 ]; do
  case "$1" in
    --release) releases+=("$2"); shift 2 ;;
    --scenario) scenarios+=(--scenario "$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    --no-validate) validate=0; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "ascend-record.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#releases[@]} -gt 0 ] || releases=(0.18.0 0.23.0.post1)

for r in "${releases[@]}"; do
  ascend_sdist "$r" >/dev/null || { echo "ascend-record.sh: unknown release $r (known: 0.18.0, 0.23.0.post1)" >&2; exit 2; }
done

# 1. The shared environment, the engine package, and per release its sdist and vLLM overlay (scripts/lib).
[ -n "$python" ] || python=$(record_venv "$cache" "$wheels" 0.33.0 any) || exit 3
engine=$(record_engine "$cache" "$python") || exit 3

status=0
for r in "${releases[@]}"; do
  read -r _ sha vllm < <(ascend_sdist "$r")
  path=$(ascend_path "$cache" "$wheels" "$sdists" "$python" "$engine" "$r") || { echo "ascend-record.sh: no environment for vllm-ascend $r" >&2; exit 3; }
  # VLLM_PLUGINS empty: the sdist's egg-info registers vllm-ascend's NPU platform plugin, which must not load here.
  echo "== recording vllm-ascend $r (on vLLM $vllm) into $out"
  set +e
  VLLM_PLUGINS= PYTHONPATH="$path" python3 tools/ascend/record.py --release "$r" --python "$python" --out "$out" \
    "${scenarios[@]}" ${log_dir:+--log-dir "$log_dir"} \
    --recorded-from "vllm-ascend $r sdist (sha256 ${sha:0:12}…) kv_p2p/mooncake_connector.py on vLLM $vllm, mooncake-transfer-engine-non-cuda 0.3.13.post1 over TCP; faked: torch_npu, NPU device calls, parallel-state lookups (tools/ascend/README.md)"
  s=$?
  set -e
  [ $s -eq 0 ] || { [ $status -eq 3 ] || status=$s; }
done
if [ $validate -eq 1 ]; then
  cargo build --quiet -p mooncake-conformance --bin mooncake-conformance
  bin="${CARGO_TARGET_DIR:-target}/debug"
  dirs=()
  for r in "${releases[@]}"; do dirs+=("$out/vllm-ascend-$r"); done
  "$bin/mooncake-conformance" validate "${dirs[@]}" || { [ $status -ne 0 ] || status=1; }
fi
exit $status
