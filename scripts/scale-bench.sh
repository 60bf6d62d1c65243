#!/usr/bin/env bash
# How decode cost grows with the work (issue 17, item 3): one invocation runs both sides on the same payloads
# and writes its section of BENCHMARKS.md (between <!-- scale-bench:begin --> / <!-- scale-bench:end -->) and
# the plots benchmarks/scale-*.svg.
#
#   ./scripts/scale-bench.sh           full run (a few minutes on 2 cores)
#   ./scripts/scale-bench.sh --quick   short loops (rough numbers; the files are still written)
#
# Steps: build bench/ (release), run `scale` (writes the payloads, times the typed and spec-driven Rust
# decoders, measures the heap of one typed decode), run bench/msgspec_bench.py over the same payloads
# (msgspec 0.23.0 from tests/oracle/requirements.txt), then bench/scale_plot.py (fits, knees, SVGs). The
# machine's load average is sampled before and after and printed in the section.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
quick=()
[ "${1:-}" = "--quick" ] && quick=(--quick)
[ -n "${MOONCAKE_PYTHON:-}" ] || MOONCAKE_PYTHON=$(scripts/oracle-venv.sh)
export CARGO_TARGET_DIR="$root/target"
out=target/scale-bench
rm -rf "$out"
mkdir -p "$out" benchmarks
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== build (bench/, release)"
(cd bench && cargo build --release --locked --bin scale)
echo "== Rust decoders"
"$root/target/release/scale" "$out" "${quick[@]}"
echo "== msgspec"
if [ ${#quick[@]} -gt 0 ]; then ms=(--repeat 3 --min-time 0.01); else ms=(--repeat 9 --min-time 0.06); fi
"$MOONCAKE_PYTHON" bench/msgspec_bench.py "$out" "$out/msgspec.json" "${ms[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== plots and report"
"$MOONCAKE_PYTHON" bench/scale_plot.py "$out" benchmarks benchmarks/ > "$out/section.md"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
{
  echo "<!-- scale-bench:begin -->"
  echo "## How decode cost grows with the message"
  echo
  echo "\`./scripts/scale-bench.sh\` ($(date -u '+%Y-%m-%d %H:%M UTC'), commit \`$(git rev-parse --short HEAD)\`$( [ ${#quick[@]} -gt 0 ] && echo ', --quick: rough numbers'); $(nproc) cores, $cpu;"
  echo "load average $load_before before, $load_after after). Median decode time per message of the typed and"
  echo "spec-driven Rust decoders (\`bench/src/bin/scale.rs\`) and of msgspec 0.23.0 (\`bench/msgspec_bench.py\`) on the"
  echo "same bytes, along one axis at a time from the production shape (64 requests, 4 KV-cache groups of 256"
  echo "blocks, 122 regions); peak heap of one decode (Rust: counting allocator; msgspec: tracemalloc). Plots are"
  echo "log-log; the dashed lines are the least-squares fits \`t = a + b·x\` (in relative error)."
  echo
  cat "$out/section.md"
  echo "<!-- scale-bench:end -->"
} > "$out/block.md"
"$MOONCAKE_PYTHON" bench/put_section.py scale-bench "$out/block.md"
echo "SUMMARY: scale bench written to BENCHMARKS.md and benchmarks/ in $(( $(date +%s) - start ))s"
