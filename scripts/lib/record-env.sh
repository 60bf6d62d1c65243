# The recorder's shared environment, as scripts/record.sh makes it: CACHE/venv with vLLM RELEASE and its
# dependencies (several GB, ~10 minutes the first time), its wheel downloaded into WHEELS when missing. Sourced by
# the opt-in scripts that run vLLM's own code (vllm-interop.sh, mooncake-v1.sh, ascend-record.sh).
#
#   record_venv CACHE WHEELS RELEASE [any]   prints the environment's python; with `any`, an environment that
#                                            has some vLLM is kept as it is, else it must hold RELEASE
#   record_overlay_vllm CACHE WHEELS PYTHON RELEASE
#                                            CACHE/vllm-RELEASE: that vLLM without its dependencies (its compiled
#                                            kernels removed, as record.sh does), to put first on PYTHONPATH
#   record_engine CACHE PYTHON               prints CACHE/mooncake-engine-<version>: the pinned Mooncake Transfer
#                                            Engine package (tests/store/requirements.txt), without dependencies
record_venv() {
  local cache=$1 wheels=$2 release=$3 check python=$1/venv/bin/python w
  check="import importlib.metadata as m; assert m.version('vllm') == '$release'"
  [ "${4:-}" = any ] && check="import vllm"
  if ! "$python" -c "$check" 2>/dev/null; then
    echo "== creating $cache/venv with vLLM $release and its dependencies (several GB, ~10 minutes)" >&2
    mkdir -p "$cache" "$wheels"
    w=$(ls "$wheels"/vllm-"$release"-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$w" ]; then
      python3 -m pip download --quiet --no-deps --only-binary=:all: "vllm==$release" -d "$wheels" >&2
      w=$(ls "$wheels"/vllm-"$release"-*.whl | head -1)
    fi
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet --disable-pip-version-check "$w" >&2
  fi
  echo "$python"
}

record_overlay_vllm() {
  local cache=$1 wheels=$2 python=$3 release=$4 target="$1/vllm-$4" w dep req
  [ -f "$target/.complete" ] && return 0
  echo "== installing vllm $release (no dependencies) into $target" >&2
  w=$(ls "$wheels"/vllm-"$release"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$w" ]; then
    "$python" -m pip download --quiet --no-deps --only-binary=:all: "vllm==$release" -d "$wheels" >&2 || return 1
    w=$(ls "$wheels"/vllm-"$release"-*.whl | head -1)
  fi
  rm -rf "$target"
  "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" "$w" >&2 \
    || return 1
  find "$target/vllm" \( -name '*.so' -o -name 'vllm-rs' \) -type f -delete
  for dep in diskcache gguf; do
    req=$(sed -n "s/^Requires-Dist: \(${dep}[ <>=!~].*\)$/\1/p" "$target"/vllm-*.dist-info/METADATA | grep -v 'extra ==' | head -1 || true)
    if [ -n "$req" ] && ! "$python" -c "import importlib.metadata as m; m.version('$dep')" 2>/dev/null; then
      "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$target" \
        "${req%%;*}" >&2 || return 1
    fi
  done
  rm -rf "$target/bin"
  touch "$target/.complete"
}

record_engine() {
  local cache=$1 python=$2 requirement engine
  requirement=$(grep -v '^#' tests/store/requirements.txt | head -1)
  engine="$cache/mooncake-engine-${requirement##*==}"
  if [ ! -f "$engine/.complete" ]; then
    echo "== installing $requirement (no dependencies) into $engine" >&2
    rm -rf "$engine"
    "$python" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile --target "$engine" \
      -r tests/store/requirements.txt >&2 || return 1
    rm -rf "$engine/bin"
    touch "$engine/.complete"
  fi
  echo "$engine"
}
