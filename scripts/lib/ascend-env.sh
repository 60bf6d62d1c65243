# The environment that runs vllm-ascend's own Mooncake pull connector (tools/ascend): the recorder's (record-env.sh,
# sourced first), the engine package, a vLLM overlay per vllm-ascend release and the release's sdist. Sourced by
# ascend-record.sh and ascend-run.sh.
#
#   ascend_sdist RELEASE                 prints "URL SHA256 VLLM": the sdist's PyPI file, its sha256 and the vLLM
#                                        release it pairs with; fails for a release it does not know
#   ascend_path CACHE WHEELS SDISTS PYTHON ENGINE RELEASE
#                                        fetches the sdist into SDISTS (once; sha256 checked), overlays its vLLM,
#                                        checks the three import together; prints the PYTHONPATH that runs it
#                                        (run it with VLLM_PLUGINS= : the sdist's egg-info registers vllm-ascend's
#                                        NPU platform plugin, which must not load here)
ascend_sdist() {
  case "$1" in
    0.18.0) echo "https://files.pythonhosted.org/packages/28/c0/d8f9a2cffd2ac46e8202d20c7e2a1efe177dea99831e9dc13969010d2c9a/vllm_ascend-0.18.0.tar.gz 8df042cfaae06fab993bff5f38bb45097634c3f398b2cf74e068347abdddb344 0.18.0" ;;
    0.23.0.post1) echo "https://files.pythonhosted.org/packages/ab/7a/32a1b1f13467fb7372588206fa1ffb735f28dcd8504d562f5c7ccdbd90d0/vllm_ascend-0.23.0.post1.tar.gz a3b9f4a5dd7aa50c37e03d1f35937c4ae5aeacc49b734cac74d59ce5757738e1 0.23.0" ;;
    *) return 1 ;;
  esac
}

# pip download --no-binary :all: cannot fetch these sdists without building them (their setup.py needs
# setuptools_scm and the CANN toolkit): the file pip finds on PyPI is fetched directly and its sha256 checked.
ascend_fetch_sdist() {
  local sdists=$1 release=$2 url sha vllm tgz
  read -r url sha vllm < <(ascend_sdist "$release")
  tgz="$sdists/$(basename "$url")"
  [ -d "$sdists/vllm_ascend-$release/vllm_ascend" ] && return 0
  mkdir -p "$sdists"
  if [ ! -f "$tgz" ]; then
    echo "== fetching $(basename "$url")" >&2
    curl -sSfL -o "$tgz.part" "$url" && mv "$tgz.part" "$tgz" || return 1
  fi
  echo "$sha  $tgz" | sha256sum -c --quiet - || { echo "$tgz: sha256 differs" >&2; return 1; }
  tar xzf "$tgz" -C "$sdists"
}

ascend_path() {
  local cache=$1 wheels=$2 sdists=$3 python=$4 engine=$5 release=$6 url sha vllm path
  read -r url sha vllm < <(ascend_sdist "$release") || return 1
  ascend_fetch_sdist "$sdists" "$release" || return 1
  record_overlay_vllm "$cache" "$wheels" "$python" "$vllm" || return 1
  path="$sdists/vllm_ascend-$release:$cache/vllm-$vllm:$engine"
  ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1' \
    || echo "the engine package needs the system library libibverbs.so.1 (Debian: apt-get install libibverbs1)" >&2
  VLLM_PLUGINS= PYTHONPATH="$path" "$python" -c 'import importlib.metadata as m, mooncake.engine, vllm_ascend; assert m.version("vllm") == "'"$vllm"'"' \
    || { echo "the environment does not import vLLM $vllm, the engine and vllm-ascend $release" >&2; return 1; }
  echo "$path"
}
