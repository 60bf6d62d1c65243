#!/usr/bin/env bash
# Puts the pinned Mooncake Transfer Engine package (tests/store/requirements.txt:
# mooncake-transfer-engine-non-cuda) and its system library libibverbs1 into a venv, when missing, for the
# real-engine interop tests (reference-impl/tests/suite/engine_interop.rs) and the store gate.
# Never fails: when something cannot be installed it says so on one line, and the tests that need the engine
# print `SKIPPED: real Transfer Engine interop — <why>` (counted by test.sh).
# Usage: scripts/engine-venv.sh PYTHON
set -uo pipefail
cd "$(dirname "$0")/.."
py=${1:?python}; pip="$(dirname "$py")/pip"
mkdir -p target
if "$py" -c 'import mooncake.engine' 2>/dev/null; then echo "engine package: present"; exit 0; fi
if ! ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1'; then
  if ! { apt-get install -y libibverbs1 || { apt-get update && apt-get install -y libibverbs1; }; } > target/engine-venv-apt.txt 2>&1; then
    echo "engine package: the system library libibverbs1 could not be installed (see target/engine-venv-apt.txt)"; exit 0
  fi
fi
if ! timeout 600 "$pip" install --quiet --disable-pip-version-check -r tests/store/requirements.txt > target/engine-venv-pip.txt 2>&1; then
  echo "engine package: $(grep -v '^#' tests/store/requirements.txt | head -1) could not be installed (see target/engine-venv-pip.txt)"; exit 0
fi
"$py" -c 'import mooncake.engine' 2>/dev/null && echo "engine package: installed" || echo "engine package: installed but not importable"
