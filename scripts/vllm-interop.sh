#!/usr/bin/env bash
# vLLM 0.33.0's own Mooncake connector processes against mooncake-peer, KV bytes moved by the real Mooncake
# Transfer Engine over TCP (kv_connector_extra_config.mooncake_protocol = "tcp", CPU tensors) on 127.0.0.1;
# every pulled block checked word for word. Opt-in (not part of ./scripts/test.sh): see tools/record/interop.py.
#
#   scripts/vllm-interop.sh [--python PY] [--only PAIRING]...
#
# It also runs `mooncake-conformance probe` against vLLM's own prefill instances (no bytes move, the recorder's
# fake engine): `probe-mixed` (0.33.0 with TP 2, 0.34.0 with leases off and on; vLLM 0.34.0 installed --no-deps
# into $MOONCAKE_RECORD_CACHE/vllm-0.34.0 when missing) and `probe-releases` (every generation-2 release whose
# package scripts/record.sh left in that cache; the others are SKIPPED). `--only probe-mixed --only
# probe-releases` runs just those, without the engine package.
#
# Without --python it uses (and creates once, several GB, ~10 minutes) the recorder's environment,
# $MOONCAKE_RECORD_CACHE/venv (default ~/.cache/mooncake-wire/record/venv: vLLM 0.33.0 and its dependencies,
# as scripts/record.sh makes it) and adds the pinned engine package (tests/store/requirements.txt) to it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/record-env.sh
cache="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}"
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
python="" pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --only|--log-dir) pass+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "vllm-interop.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$python" ] || python=$(record_venv "$cache" "$wheels" 0.33.0)
"$python" -c 'import importlib.metadata as m; v = m.version("vllm"); assert v == "0.33.0", v' \
  || { echo "vllm-interop.sh: $python does not have vLLM 0.33.0" >&2; exit 2; }
probe_only=1
for ((i = 0; i < ${#pass[@]}; i += 2)); do
  [ "${pass[i]}" = --only ] && [[ "${pass[i+1]}" != probe-* ]] && probe_only=0
done
[ ${#pass[@]} -eq 0 ] && probe_only=0
if [ "$probe_only" = 0 ]; then
  ./scripts/engine-venv.sh "$python"
  "$python" -c 'import mooncake.engine' || { echo "vllm-interop.sh: the engine package is not importable" >&2; exit 3; }
fi
# vLLM 0.34.0 for the probe entries, as scripts/record.sh installs another release over the 0.33.0 environment.
target="$cache/vllm-0.34.0"
if [ ! -f "$target/.complete" ]; then
  echo "== installing vllm 0.34.0 (no dependencies) into $target"
  mkdir -p "$wheels"
  w=$(ls "$wheels"/vllm-0.34.0-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$w" ]; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: "vllm==0.34.0" -d "$wheels"
    w=$(ls "$wheels"/vllm-0.34.0-*.whl | head -1)
  fi
  rm -rf "$target"
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" "$w"
  find "$target/vllm" \( -name '*.so' -o -name 'vllm-rs' \) -type f -delete
  rm -rf "$target/bin"
  touch "$target/.complete"
fi
cargo build --quiet -p mooncake-reference --bin mooncake-peer -p mooncake-conformance --bin mooncake-conformance
start=$(date +%s)
set +e
bin="${CARGO_TARGET_DIR:-target}/debug"
"$python" tools/record/interop.py --python "$python" --peer "$bin/mooncake-peer" \
  --cli "$bin/mooncake-conformance" --record-cache "$cache" "${pass[@]}"
status=$?
set -e
echo "== $(( $(date +%s) - start )) s (exit $status)"
exit $status
