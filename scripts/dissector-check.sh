#!/usr/bin/env bash
# The Wireshark dissector against every bundled trace, headless (issue 31 item 3): installs Debian's tshark when
# it is missing (apt-get), writes the plugin (`mooncake-conformance dissector`) and, for every trace under
# conformance/traces and conformance/traces-pull, its capture (`mooncake-conformance pcap`), dissects it with
# `tshark -X lua_script:… -T json` (all traces in one capture, one after the other) and checks with tools/wireshark/check.py that the dissection shows exactly the
# trace's payloads (every sent ZeroMQ message, in order, as the trace decoded it, fitting the trace's revision;
# every bootstrap body), with no malformed, unknown-message or Lua-error expert info.
# Prints one `counts` line per trace and a summary; exit 1 on a mismatch. When tshark cannot be installed it
# prints `SKIPPED: dissector check — <why>` and exits 0.
# With --live it also captures the loopback interface (dumpcap) while scripts/vllm-interop.sh runs vLLM 0.33.0's
# own processes against mooncake-peer (minutes; the recorder's vLLM environment), and checks that the capture
# dissects with no malformed, unknown-message or Lua-error expert info (counts of what it read are printed).
# Other traffic on the loopback interface at the same time is captured too.
# Usage: scripts/dissector-check.sh [--live] [CLI]   (CLI: a mooncake-conformance binary; default: built here)
set -uo pipefail
cd "$(dirname "$0")/.."
live=0
if [ "${1:-}" = "--live" ]; then live=1; shift; fi
cli=${1:-}
if [ -z "$cli" ]; then
  cargo build -q -p mooncake-conformance || exit 3
  cli="${CARGO_TARGET_DIR:-target}/debug/mooncake-conformance"
fi
mkdir -p target
if ! command -v tshark >/dev/null; then
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y tshark || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y tshark; }; } > target/dissector-check-apt.txt 2>&1; then
    echo "SKIPPED: dissector check — tshark could not be installed (apt-get; see target/dissector-check-apt.txt)"; exit 0
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cli" dissector --out "$work/mooncake.lua" >/dev/null || exit 3
start=$(date +%s)
"$cli" pcap conformance/traces conformance/traces-pull --out "$work/all.pcapng" --format json > "$work/capture.json" || exit 3
status=0
# tshark's single pass, then two passes (-2: what the GUI's re-dissection of a selected packet does).
for passes in "" "-2"; do
  tshark $passes -n -X "lua_script:$work/mooncake.lua" -r "$work/all.pcapng" -T json --no-duplicate-keys > "$work/dissection.json" 2> "$work/err.txt"
  grep -v '^Running as user' "$work/err.txt" | sed 's/^/tshark: /'
  python3 tools/wireshark/check.py "$work/capture.json" "$work/dissection.json" > "$work/check.txt" || status=1
  [ -n "$passes" ] || cat "$work/check.txt"
  echo "dissector check${passes:+ (tshark $passes)}: $(tail -1 "$work/check.txt" | sed 's/^total //')"
done
echo "dissector check: $(( $(date +%s) - start )) s ($(tshark --version 2>/dev/null | head -1))"
if [ $live -eq 1 ]; then
  dumpcap -q -i lo -f tcp -w "$work/live.pcapng" -a duration:900 > "$work/dumpcap.txt" 2>&1 &
  dumpcap_pid=$!
  sleep 2
  scripts/vllm-interop.sh > "$work/interop.txt" 2>&1
  interop=$?
  sleep 1
  kill "$dumpcap_pid"; wait "$dumpcap_pid" 2>/dev/null
  grep -E '^(PASS|FAIL|==)' "$work/interop.txt"
  [ $interop -eq 0 ] || { echo "live capture: scripts/vllm-interop.sh failed (exit $interop)"; exit 1; }
  for passes in "" "-2"; do
    tshark $passes -n -X "lua_script:$work/mooncake.lua" -r "$work/live.pcapng" -T json --no-duplicate-keys > "$work/live.json" 2> "$work/err.txt"
    echo "live capture${passes:+ (tshark $passes)}:"
    python3 tools/wireshark/check.py --live "$work/live.json" || status=1
  done
fi
exit $status
