#!/usr/bin/env bash
# The real-store gate: installs the pinned Mooncake package (tests/store/requirements.txt) and its system
# library into the test venv when missing, then runs tests/store/store_gate.py (a mooncake_master on
# 127.0.0.1, always stopped; keys from our builder, read back by independently built keys).
# Skips — exit 0 with a SKIP line — only when the package or its library cannot be installed.
# Usage: scripts/store-gate.sh PYTHON CLI
set -uo pipefail
cd "$(dirname "$0")/.."
py=${1:?python}; cli=${2:?mooncake-conformance binary}
pip="$(dirname "$py")/pip"
if ! "$py" -c 'import mooncake.store' 2>/dev/null; then
  if ! ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1'; then
    if ! { apt-get install -y libibverbs1 || { apt-get update && apt-get install -y libibverbs1; }; } > target/store-gate-apt.txt 2>&1; then
      echo "SKIP store gate: the system library libibverbs1 could not be installed (apt-get; see target/store-gate-apt.txt)"; exit 0
    fi
  fi
  if ! timeout 600 "$pip" install --quiet --disable-pip-version-check -r tests/store/requirements.txt > target/store-gate-pip.txt 2>&1; then
    echo "SKIP store gate: $(grep -v '^#' tests/store/requirements.txt | head -1) could not be installed (pip; see target/store-gate-pip.txt)"; exit 0
  fi
fi
STORE_GATE_LOG_DIR="$PWD/target" timeout 150 "$py" tests/store/store_gate.py --cli "$cli" 2> target/store-gate-log.txt
status=$?
if [ $status -ne 0 ]; then tail -20 target/store-gate-log.txt; fi
exit $status
