#!/usr/bin/env bash
# Generate the msgspec vectors of a vLLM release's wire revision from the message classes of its own wheel.
#
#   scripts/gen-vectors.sh --release X [--seed N] [--out DIR] [--python PY] [--profile full|compact] [--no-download]
#
# Writes DIR/<revision>/<Message>.jsonl and the revision's row of DIR/revisions.json (default DIR: the bundled
# conformance/vectors; DIR/revisions.json is started from the bundled table when absent). A release of a revision
# in the table regenerates that revision; any other release becomes a revision of its own. With the bundled seed
# (20261129, the default) the bundled files are reproduced byte for byte (tools/vectors/README.md).
#
# Wheels: $MOONCAKE_WHEEL_CACHE (default ~/.cache/mooncake-wire/wheels), fetched there with
# `pip download --no-deps vllm==X` when missing (unless --no-download). vLLM itself is never installed or imported:
# only msgspec is needed. Python: --python PY, else the repository's .venv (./scripts/test.sh creates it with the
# pinned msgspec), else python3. The vectors record the msgspec version that produced them; the bundled ones are
# msgspec 0.23.0's (tests/oracle/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
python="" args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --release|--seed|--out|--profile|--table) args+=("$1" "$2"); shift 2 ;;
    --no-download) args+=("$1"); shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gen-vectors.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
"$python" -c 'import msgspec' 2>/dev/null || {
  echo "gen-vectors.sh: $python has no msgspec (run ./scripts/test.sh to create .venv, or pass --python)" >&2; exit 2; }
want=$(sed -n 's/^msgspec==//p' tests/oracle/requirements.txt)
have=$("$python" -c 'import msgspec; print(msgspec.__version__)')
[ "$have" = "$want" ] || echo "gen-vectors.sh: warning: msgspec $have (the bundled vectors are msgspec $want's)" >&2
exec "$python" tools/vectors/gen_vectors.py --pip-python "$python" "${args[@]}"
