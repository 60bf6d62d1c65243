#!/usr/bin/env bash
# Runs every cargo-fuzz target (coverage-guided libFuzzer) for a short while, on the project's stable
# toolchain: cargo-fuzz passes nightly-only -Z flags to rustc, which stable accepts with RUSTC_BOOTSTRAP=1.
# No sanitizer (-s none): the code under test has no `unsafe`; debug assertions are on (-a), so an overflow
# panics. Each target starts from fuzz/corpus/<target> (grown across runs; scripts/fuzz-seeds.sh fills it) and
# the committed seeds, with its dictionary. Prints one stats line per target; exits non-zero on a crash
# (the input is left in fuzz/artifacts/<target>/).
#
#   scripts/fuzz-smoke.sh [-runs N | -time SECONDS] [target...]     default: -time 20, every target
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). The test suite does not call this script: it runs
# the same target bodies over the seeds and a few thousand derived inputs as normal tests
# (fuzz/harness/tests/smoke.rs), which needs neither cargo-fuzz nor libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=20)
case "${1:-}" in
  -runs) limit=(-runs="$2"); shift 2 ;;
  -time) limit=(-max_total_time="$2"); shift 2 ;;
esac
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is not installed: cargo install cargo-fuzz --locked"; exit 2; }
export RUSTC_BOOTSTRAP=1
flags=(--fuzz-dir fuzz -O -a -s none)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
cargo fuzz build "${flags[@]}" 2>&1 | tail -1
dict_of() { grep -A4 "name: \"$1\"" fuzz/harness/src/targets/mod.rs | grep -o 'dict: "[a-z]*\.dict"' | head -1 | cut -d'"' -f2; }
mkdir -p target
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  log="target/fuzz-$t.log"
  if cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
      -dict="fuzz/dict/$(dict_of "$t")" "${limit[@]}" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
    echo "fuzz $t: $runs runs, $speed exec/s, $cov"
  else
    status=1
    echo "fuzz $t: CRASH (log: $log)"; grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  fi
done
exit $status
