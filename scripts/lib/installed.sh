# Checks of installed programs, shared by scripts/install-check.sh (`cargo install`) and scripts/wheel.sh (the
# wheel in a fresh venv). Sourced, not run.
#
#   installed_checks LABEL WANT FULL EXTRACT_PATH ENV...
#     LABEL         what is checked ("installed" or "wheel"), the start of every line printed
#     WANT          how many cases the tree's binary lists
#     FULL          1: run every case; 0: one case (a second install of the same build)
#     EXTRACT_PATH  PATH for `extract` (/nonexistent proves the interpreter beside the program is found)
#     ENV...        the command prefix the programs run under (`env -i … PATH=<installed bin>:…`)
# From an empty directory: the installed runner lists WANT cases and passes them (or one), passes a case with the
# installed mooncake-peer as testee, `extract` derives a generation-1 wire, `mooncake-peer --help` answers, and
# nothing is left in the directory. Exits 1 on the first failure.
installed_checks() {
  local label=$1 want=$2 full=$3 extract_path=$4 got summary line work
  shift 4
  work=$(mktemp -d)
  mkdir -p "$work/empty" "$work/py"
  cd "$work/empty" || exit 1
  got=$("$@" mooncake-conformance run --list | sed -n '/^$/q;p' | wc -l)
  [ "$want" = "$got" ] && [ "$got" -gt 0 ] || { echo "$label: the installed runner lists $got cases, the tree's $want"; exit 1; }
  if [ "$full" = 1 ]; then
    summary=$("$@" mooncake-conformance run --progress off | tail -1)
    echo "$label, from an empty directory: $summary"
    case "$summary" in *"conformance: $want cases"*"— OK") ;; *) echo "$label: the installed run did not pass $want cases"; exit 1 ;; esac
  fi
  summary=$("$@" mooncake-conformance run --progress off --case vllm-0.33.0/a_single_success --testee "mooncake-peer --log error testee" | tail -1)
  echo "$label, the installed mooncake-peer as testee: $summary"
  case "$summary" in *"— OK") ;; *) echo "$label: the installed mooncake-peer did not pass"; exit 1 ;; esac
  "$@" mooncake-peer --help > /dev/null || { echo "$label: mooncake-peer --help failed"; exit 1; }
  # extract runs its embedded script (no tools/ directory). A generation-1 request written from the spec's facts:
  # the struct alone has 0.13.0's wire fingerprint.
  printf 'import msgspec\n\nReqId = str\n\n\nclass MooncakeAgentMetadata(msgspec.Struct, omit_defaults=True, dict=True):\n    remote_hostname: str\n    remote_port: int\n    request_ids: list[ReqId]\n    kv_caches_base_addr: list[int]\n    block_ids: list[list[int]]\n' > "$work/py/proto.py"
  line=$("$@" PATH="$extract_path" "$(command_in "$@" mooncake-conformance)" extract "$work/py/proto.py" --format summary 2> "$work/extract.err") \
    || { cat "$work/extract.err"; echo "$label: the installed extract failed (PATH=$extract_path)"; exit 1; }
  case "$line" in *"closest bundled revision vllm-0.13.0..0.15.1, "*"wire fingerprint 9d4e3ba94b2e8fad"*) ;; *) echo "$label: extract did not derive vllm-0.13.0..0.15.1's wire: $line"; exit 1 ;; esac
  echo "$label extract (PATH=$extract_path): $line"
  [ -z "$(ls -A "$work/empty")" ] || { echo "$label: the run left files in the working directory"; ls -A "$work/empty"; exit 1; }
  cd / && rm -rf "$work"
  echo "$label: OK ($got cases, same as the tree)"
}

# The absolute path of PROGRAM as the environment prefix "$@" (ending in PROGRAM) would find it.
command_in() {
  local n=$#
  "${@:1:n-1}" sh -c 'command -v "$1"' _ "${!n}"
}

# Runs "$@" with the source tree ROOT hidden: a private mount namespace with an empty tmpfs over it, so a program
# that read anything of the tree at run time (a path compiled in) fails. Where mount namespaces are not allowed it
# runs "$@" as it is and prints a SKIPPED line (the test command counts them). The functions "$@" needs must be
# named in FUNCS (a space-separated list), as they are handed to the new shell.
without_tree() {
  local root=$1 funcs=$2 defs
  shift 2
  defs=$(declare -f $funcs)
  if unshare -rm true 2>/dev/null; then
    unshare -rm bash -c 'eval "$1"; mount -t tmpfs none "$2" || exit 3; shift 2; "$@"' _ "$defs" "$root" "$@"
  else
    echo "SKIPPED: the installed programs checked with the source tree in place — no mount namespace (unshare -rm) here"
    "$@"
  fi
}
