#!/usr/bin/env bash
# Record traces from vLLM's own MooncakeConnector code (opt-in; not part of ./scripts/test.sh).
#
#   scripts/record.sh --release 0.33.0 [--scenario NAME]... [--out DIR] [--python PY]
#
# Without --python, one environment with vLLM's dependencies (torch, pyzmq, msgspec, fastapi, uvicorn, httpx, ...)
# is created once and cached: $MOONCAKE_RECORD_CACHE/venv (default ~/.cache/mooncake-wire/record/venv), a pip
# install of the newest supported vLLM (RECORD_BASE_RELEASE). Any other release is installed next to it with
# `pip install --no-deps --target $MOONCAKE_RECORD_CACHE/vllm-<release>` and put first on PYTHONPATH; its compiled
# kernels are deleted after the install (built for another torch, never on the connector's path). Wheels come from
# $MOONCAKE_WHEELS (default ~/.cache/mooncake-wire/wheels), downloaded there with `pip download` when missing.
# With --python, that interpreter's environment is used instead of the cached venv (same overlay rule when its vLLM
# is another release). Everything is idempotent; see tools/record/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

base_release="${RECORD_BASE_RELEASE:-0.33.0}"
cache="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}"
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
# Import-time dependencies of older releases that the shared environment lacks (see tools/record/README.md).
IMPORT_DEPS="gguf diskcache"

release="" python="" out=""
pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --scenario) pass+=(--scenario "$2"); shift 2 ;;
    --settle-extra|--register-timeout|--dup-register-timeout|--log-dir) pass+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "record.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$release" ] || { echo "record.sh: --release is required" >&2; exit 2; }
[ -n "$out" ] || out="${MOONCAKE_RECORDINGS:-$repo/recordings}/vllm-$release"
mkdir -p "$cache" "$wheels"

wheel_of() {  # path of the cached wheel of release $1, downloading it when missing
  local w
  w=$(ls "$wheels"/vllm-"$1"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$w" ]; then
    echo "== downloading the vllm $1 wheel into $wheels" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: "vllm==$1" -d "$wheels" >&2
    w=$(ls "$wheels"/vllm-"$1"-*.whl | head -1)
  fi
  echo "$w"
}

vllm_version_of() {  # vLLM version an interpreter imports (empty when none)
  "$1" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null || true
}

# 1. The shared environment.
if [ -z "$python" ]; then
  python="$cache/venv/bin/python"
  if [ -z "$(vllm_version_of "$python")" ]; then
    echo "== creating $cache/venv with vLLM $base_release and its dependencies (several GB, ~10 minutes)"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet --disable-pip-version-check "$(wheel_of "$base_release")"
  fi
fi
env_release="$(vllm_version_of "$python")"
[ -n "$env_release" ] || { echo "record.sh: $python has no vLLM installed" >&2; exit 2; }

# 2. The release's own vLLM package, when it is not the environment's.
vllm_path=()
if [ "$env_release" != "$release" ]; then
  target="$cache/vllm-$release"
  if [ ! -f "$target/.complete" ]; then
    echo "== installing vllm $release (no dependencies) into $target"
    rm -rf "$target"
    "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" \
      "$(wheel_of "$release")"
    # Compiled kernels: built for another torch and never on the connector's path.
    find "$target/vllm" \( -name '*.so' -o -name 'vllm-rs' \) -type f -delete
    rm -rf "$target/bin"
    # Pure-Python dependencies that importing an older vLLM needs and the newest one dropped: installed next to
    # it (also without dependencies), at the version the release declares.
    for dep in $IMPORT_DEPS; do
      req=$(sed -n "s/^Requires-Dist: \(${dep}[ <>=!~].*\)$/\1/p; s/^Requires-Dist: \(${dep}\)$/\1/p" \
            "$target"/vllm-*.dist-info/METADATA | grep -v 'extra ==' | head -1 || true)
      if [ -n "$req" ] && ! "$python" -c "import importlib.metadata as m; m.version('$dep')" 2>/dev/null; then
        echo "== installing $req (no dependencies) into $target"
        "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" "${req%%;*}"
      fi
    done
    rm -rf "$target/bin"
    touch "$target/.complete"
  fi
  vllm_path=(--vllm-path "$target")
fi

echo "== recording vLLM $release into $out"
start=$(date +%s)
set +e
"$python" tools/record/record.py --release "$release" --python "$python" --out "$out" "${vllm_path[@]}" "${pass[@]}"
status=$?
set -e
echo "== vLLM $release: $(( $(date +%s) - start )) s in total (exit $status)"
exit $status
