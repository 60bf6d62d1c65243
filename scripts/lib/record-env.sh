# The recorder's shared environment, as scripts/record.sh makes it: CACHE/venv with vLLM RELEASE and its
# dependencies (several GB, ~10 minutes the first time), its wheel downloaded into WHEELS when missing. Sourced by
# the opt-in scripts that run vLLM's own code (vllm-interop.sh, mooncake-v1.sh).
#
#   record_venv CACHE WHEELS RELEASE [any]   prints the environment's python; with `any`, an environment that
#                                            has some vLLM is kept as it is, else it must hold RELEASE
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
