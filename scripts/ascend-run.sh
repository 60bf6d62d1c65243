#!/usr/bin/env bash
# vllm-ascend's own Mooncake pull connector (kv_p2p/mooncake_connector.py of its released sdists) judged by the
# conformance runner: `mooncake-conformance run` plays each release's own pull recordings
# (conformance/traces-pull/vllm-ascend-<release>) against tools/ascend/testee.py, which runs the connector in a
# tools/ascend/worker.py process (torch_npu and the device/parallel-state lookups faked, the real Mooncake Transfer
# Engine over TCP on 127.0.0.1). Opt-in (not part of ./scripts/test.sh): see tools/ascend/README.md.
#
#   scripts/ascend-run.sh [--release R]... [--role prefiller|decoder] [--case TEXT]... [--python PY]
#                         [--log-dir DIR] [--json-out DIR] [--expected-failures FILE] [--jobs N]
#
#   --release    vllm-ascend release: 0.18.0, 0.23.0.post1 (default: both)
#   --role       only that role's cases (default: both)
#   --case       only cases whose id contains TEXT (run's --case)
#   --python     an environment with torch and vLLM's dependencies (default: the recorder's, as record.sh makes it)
#   --log-dir    each case's testee standard error in DIR/<release>/ (run's --testee-log)
#   --json-out   the JSON report of each release in DIR/<release>.json
#   --expected-failures  run's --expected-failures (default: tools/ascend/expected-failures-<release>.toml when
#                there is one, else none)
#   --jobs       cases at once (default 1: each case starts one to three workers that import torch and vLLM,
#                ~12 s of CPU each)
#
# Environment: as scripts/ascend-record.sh (the recorder's venv, the engine package, per release its sdist and the
# vLLM it pairs with; about 1.2 GB the first time; the engine needs the system library libibverbs.so.1). About
# 20-40 s per case.
#
# Exit status: 0 every case of every release passed (or failed as expected); 1 a case failed; 2 bad usage;
# 3 the environment cannot be made, or a testee died or could not start (the runner's exit code 3).
#
# Example: scripts/ascend-run.sh --release 0.18.0 --role decoder --log-dir /tmp/ascend-run
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record-env.sh
. scripts/lib/ascend-env.sh
cache="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}"
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
sdists="${MOONCAKE_ASCEND_CACHE:-$HOME/.cache/mooncake-wire/ascend}"
releases=() filters=() python="" log_dir="" json_dir="" xfail="" jobs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --release) releases+=("${2:?--release needs a value}"); shift 2 ;;
    --role) filters+=(--role "${2:?--role needs a value}"); shift 2 ;;
    --case) filters+=(--case "${2:?--case needs a value}"); shift 2 ;;
    --python) python="${2:?}"; shift 2 ;;
    --log-dir) log_dir="${2:?}"; shift 2 ;;
    --json-out) json_dir="${2:?}"; shift 2 ;;
    --expected-failures) xfail="${2:?}"; shift 2 ;;
    --jobs) jobs="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "ascend-run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#releases[@]} -gt 0 ] || releases=(0.18.0 0.23.0.post1)
for r in "${releases[@]}"; do
  ascend_sdist "$r" >/dev/null || { echo "ascend-run.sh: unknown release $r (known: 0.18.0, 0.23.0.post1)" >&2; exit 2; }
done
[ -z "$xfail" ] || [ -f "$xfail" ] || { echo "ascend-run.sh: no file $xfail" >&2; exit 2; }

[ -n "$python" ] || python=$(record_venv "$cache" "$wheels" 0.33.0 any) || exit 3
engine=$(record_engine "$cache" "$python") || exit 3
cargo build --quiet -p mooncake-conformance --bin mooncake-conformance || exit 3
bin="${CARGO_TARGET_DIR:-target}/debug/mooncake-conformance"

status=0
for r in "${releases[@]}"; do
  path=$(ascend_path "$cache" "$wheels" "$sdists" "$python" "$engine" "$r") \
    || { echo "ascend-run.sh: no environment for vllm-ascend $r" >&2; exit 3; }
  args=(--jobs "$jobs")
  xf="${xfail:-tools/ascend/expected-failures-$r.toml}"
  [ -f "$xf" ] && args+=(--expected-failures "$xf")
  [ -z "$log_dir" ] || { mkdir -p "$log_dir/$r"; args+=(--testee-log "$log_dir/$r"); }
  [ -z "$json_dir" ] || { mkdir -p "$json_dir"; args+=(--json "$json_dir/$r.json"); }
  echo "== run: vllm-ascend $r's pull recordings against its own connector (tools/ascend/testee.py)"
  start=$(date +%s)
  set +e
  # VLLM_PLUGINS empty: the sdist's egg-info registers vllm-ascend's NPU platform plugin, which must not load here.
  VLLM_PLUGINS= PYTHONPATH="$path" "$bin" run "conformance/traces-pull/vllm-ascend-$r" "${filters[@]}" "${args[@]}" \
    --progress lines --testee "$python tools/ascend/testee.py --release $r --python $python"
  s=$?
  set -e
  echo "== vllm-ascend $r: $(( $(date +%s) - start )) s (exit $s)"
  # The worst outcome wins: an environment failure (3) over bad usage (2) over a failed case (1).
  [ $s -le $status ] || status=$s
done
exit $status
