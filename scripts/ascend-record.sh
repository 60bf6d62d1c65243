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

# The sdist of each release: its PyPI file and sha256 (pip download would build it, which needs the CANN toolkit).
sdist_url() {
  case "$1" in
    0.18.0) echo "https://files.pythonhosted.org/packages/28/c0/d8f9a2cffd2ac46e8202d20c7e2a1efe177dea99831e9dc13969010d2c9a/vllm_ascend-0.18.0.tar.gz 8df042cfaae06fab993bff5f38bb45097634c3f398b2cf74e068347abdddb344 0.18.0" ;;
    0.23.0.post1) echo "https://files.pythonhosted.org/packages/ab/7a/32a1b1f13467fb7372588206fa1ffb735f28dcd8504d562f5c7ccdbd90d0/vllm_ascend-0.23.0.post1.tar.gz a3b9f4a5dd7aa50c37e03d1f35937c4ae5aeacc49b734cac74d59ce5757738e1 0.23.0" ;;
    *) return 1 ;;
  esac
}
for r in "${releases[@]}"; do
  sdist_url "$r" >/dev/null || { echo "ascend-record.sh: unknown release $r (known: 0.18.0, 0.23.0.post1)" >&2; exit 2; }
done

# 1. The shared environment, the engine package, and a vLLM overlay per release (as scripts/mooncake-v1.sh does).
[ -n "$python" ] || python=$(record_venv "$cache" "$wheels" 0.33.0 any) || exit 3
overlay_vllm() { record_overlay_vllm "$cache" "$wheels" "$python" "$1"; }
engine=$(record_engine "$cache" "$python") || exit 3
fetch_sdist() {
  local release=$1 url sha vllm tgz
  read -r url sha vllm < <(sdist_url "$release")
  tgz="$sdists/$(basename "$url")"
  if [ ! -d "$sdists/vllm_ascend-$release/vllm_ascend" ]; then
    mkdir -p "$sdists"
    [ -f "$tgz" ] || { echo "== fetching $(basename "$url")"; curl -sSfL -o "$tgz.part" "$url" && mv "$tgz.part" "$tgz"; } || exit 3
    echo "$sha  $tgz" | sha256sum -c --quiet - || { echo "ascend-record.sh: $tgz: sha256 differs" >&2; exit 3; }
    tar xzf "$tgz" -C "$sdists" || exit 3
  fi
}

status=0
for r in "${releases[@]}"; do
  read -r _ sha vllm < <(sdist_url "$r")
  fetch_sdist "$r"
  overlay_vllm "$vllm" || exit 3
  path="$sdists/vllm_ascend-$r:$cache/vllm-$vllm:$engine"
  # VLLM_PLUGINS empty: the sdist's egg-info registers vllm-ascend's NPU platform plugin, which must not load here.
  VLLM_PLUGINS= PYTHONPATH="$path" "$python" -c 'import importlib.metadata as m, mooncake.engine, vllm_ascend; assert m.version("vllm") == "'"$vllm"'"' \
    || { echo "ascend-record.sh: the environment does not import vLLM $vllm, the engine and vllm-ascend $r" >&2; exit 3; }
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
