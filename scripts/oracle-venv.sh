#!/usr/bin/env bash
# The pinned Python oracle venv (.venv, tests/oracle/requirements.txt: msgspec 0.23.0, pyzmq), set up when it
# is missing or incomplete; prints the path of its python on standard output (what it does, on standard
# error). scripts/test.sh, scripts/bench.sh and scripts/scale-bench.sh take their MOONCAKE_PYTHON from it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import msgspec, zmq; assert msgspec.__version__ == "0.23.0"' 2>/dev/null; then
  echo "== setting up .venv (tests/oracle/requirements.txt)" >&2
  python3 -m venv .venv >&2
  .venv/bin/pip install --quiet --disable-pip-version-check -r tests/oracle/requirements.txt >&2
fi
echo "$PWD/.venv/bin/python"
