#!/usr/bin/env bash
# Mooncake's own vLLM connector (mooncake_connector_v1 of pip mooncake-transfer-engine-non-cuda 0.3.13.post1, on
# vLLM 0.12.0's API) judged by the conformance runner and paired live with other implementations; KV bytes moved
# by the real Mooncake Transfer Engine over TCP on 127.0.0.1. Opt-in (not part of ./scripts/test.sh): see
# tools/mooncake_v1/README.md.
#
#   scripts/mooncake-v1.sh [run|live|all] [--attn-backend FLASHINFER|FLASH_ATTN|TRITON_ATTN] [--python PY]
#                          [--pairing P:D]... [--tp N] [--log-dir DIR]
#   scripts/mooncake-v1.sh record [--scenario NAME]... [--out DIR] [--python PY] [--log-dir DIR]
#
#   run   every generation-1 case (vllm-0.13.0..0.15.1) against the driver, with the backend's expected failures
#         (tools/mooncake_v1/expected-failures-<backend>.toml, when there is one)
#   live  tools/mooncake_v1/live.py: the connector against the reference peer, itself and vLLM 0.15.1's own
#         generation-1 connector (default pairings: mc:ref ref:mc mc:mc mc:vllm vllm:mc); --tp N (1-4) runs N
#         TP ranks on each side, rank r pulling from rank r
#   all   both (the default)
#   record  tools/record/record.py --impl mooncake --release 0.12.0: the connector's own traffic recorded as traces
#         (every generation-1 scenario of conformance/scenarios.toml, or those named; fake transfer engine, no bytes
#         move; FlashInfer layout) into DIR (default recordings/mooncake-<engine version>)
#
# Environment: the recorder's ($MOONCAKE_RECORD_CACHE/venv, default ~/.cache/mooncake-wire/record/venv: vLLM and its
# dependencies, as scripts/record.sh makes it; several GB, ~10 minutes the first time) with vLLM 0.12.0, vLLM 0.15.1
# and the engine package installed next to it (pip --no-deps --target, put first on PYTHONPATH; ~250 MB in all).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record-env.sh
cache="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}"
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
mode=all python="" backend=FLASHINFER log_dir="" pairings=() scenarios=() out="" tp=1
while [ $# -gt 0 ]; do
  case "$1" in
    run|live|all|record) mode="$1"; shift ;;
    --attn-backend) backend="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --pairing) pairings+=(--pairing "$2"); shift 2 ;;
    --tp) tp="$2"; shift 2 ;;
    --log-dir) log_dir="$2"; shift 2 ;;
    --scenario) scenarios+=(--scenario "$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "mooncake-v1.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$backend" in FLASHINFER|FLASH_ATTN|TRITON_ATTN) ;; *) echo "mooncake-v1.sh: unknown backend $backend" >&2; exit 2 ;; esac

# 1. The shared environment (as scripts/record.sh makes it).
[ -n "$python" ] || python=$(record_venv "$cache" "$wheels" 0.33.0 any)

# 2. Overlays: a vLLM release without its dependencies (compiled kernels removed, as record.sh does), the engine.
overlay_vllm() { record_overlay_vllm "$cache" "$wheels" "$python" "$1"; }
engine=$(record_engine "$cache" "$python") || exit 3
overlay_vllm 0.12.0
case "$mode" in run|record) ;; *) overlay_vllm 0.15.1 ;; esac
mc_path="$cache/vllm-0.12.0:$engine"
PYTHONPATH="$mc_path" "$python" -c 'import importlib.metadata as m, mooncake.engine; v = m.version("vllm"); assert v == "0.12.0", v' \
  || { echo "mooncake-v1.sh: the driver's environment does not import vLLM 0.12.0 and the engine" >&2; exit 3; }

if [ "$mode" = record ]; then
  [ -n "$out" ] || out="${MOONCAKE_RECORDINGS:-$PWD/recordings}/mooncake-${engine##*/mooncake-engine-}"
  echo "== record: mooncake_connector_v1 on vLLM 0.12.0 into $out"
  start=$(date +%s)
  set +e
  PYTHONPATH="$engine" "$python" tools/record/record.py --impl mooncake --release 0.12.0 --python "$python" \
    --vllm-path "$cache/vllm-0.12.0" --out "$out" "${scenarios[@]}" ${log_dir:+--log-dir "$log_dir/record"}
  status=$?
  set -e
  echo "== $(( $(date +%s) - start )) s (exit $status)"
  exit $status
fi

cargo build --quiet -p mooncake-reference --bin mooncake-peer -p mooncake-conformance --bin mooncake-conformance
bin="${CARGO_TARGET_DIR:-target}/debug"
status=0
start=$(date +%s)
if [ "$mode" != live ]; then
  echo "== run: generation-1 cases against mooncake_connector_v1 ($backend)"
  xf=tools/mooncake_v1/expected-failures-$backend.toml
  xargs=()
  [ -f "$xf" ] && xargs=(--expected-failures "$xf")
  set +e
  PYTHONPATH="$mc_path" "$bin/mooncake-conformance" run --revision 0.13.0 "${xargs[@]}" \
    --testee "$python tools/mooncake_v1/testee.py --attn-backend $backend" ${log_dir:+--testee-log "$log_dir/run"}
  s=$?
  set -e
  [ $s -eq 0 ] || status=$s
fi
if [ "$mode" != run ]; then
  echo "== live: mooncake_connector_v1 ($backend) against other implementations"
  [ ${#pairings[@]} -gt 0 ] || pairings=(--pairing mc:ref --pairing ref:mc --pairing mc:mc --pairing mc:vllm --pairing vllm:mc)
  set +e
  "$python" tools/mooncake_v1/live.py --python "$python" --mc-path "$mc_path" --vllm-path "$cache/vllm-0.15.1" \
    --engine-path "$engine" --peer "$bin/mooncake-peer" --attn-backend "$backend" --tp "$tp" \
    "${pairings[@]}" ${log_dir:+--log-dir "$log_dir/live"}
  s=$?
  set -e
  [ $s -eq 0 ] || status=$s
fi
echo "== $(( $(date +%s) - start )) s (exit $status)"
exit $status
