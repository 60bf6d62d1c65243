#!/usr/bin/env bash
# Runs every cargo-fuzz target (coverage-guided libFuzzer), one after the other with one job each, on the
# project's stable toolchain: cargo-fuzz passes nightly-only -Z flags to rustc (sanitizer-coverage
# instrumentation), which a stable rustc accepts when RUSTC_BOOTSTRAP=1 is set; this script sets it.
# No sanitizer (-s none): the code under test has no `unsafe`. Debug assertions are on (-a), so an arithmetic
# overflow panics. Each target starts from fuzz/corpus/<target> (grown across runs; scripts/fuzz-seeds.sh
# fills it; an empty one is first filled from the committed minimised corpus fuzz/corpus-min/<target>.tar.gz,
# see scripts/fuzz-corpus.sh), the committed seeds fuzz/seeds/<target> and past crashes fuzz/regressions/<target>, with its
# dictionary and -max_len (both from fuzz/harness/src/targets/mod.rs). Prints one stats line per target (exact
# libFuzzer figures); the full log is target/fuzz-<target>.log. Exits non-zero on a crash (the input is left
# in fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/ once fixed).
#
#   scripts/fuzz-smoke.sh [-runs N] [-time SECONDS] [target...]     default: -time 20, every target
#   (both limits may be given: the run stops at whichever comes first)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). The test suite does not call this script: it runs
# the same target bodies over the seeds and a few thousand derived inputs as normal tests
# (fuzz/harness/tests/suite/smoke.rs), which needs neither cargo-fuzz nor libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=()
while [ $# -gt 0 ]; do
  case "$1" in
    -runs) limit+=(-runs="$2"); shift 2 ;;
    -time) limit+=(-max_total_time="$2"); shift 2 ;;
    *) break ;;
  esac
done
[ ${#limit[@]} -gt 0 ] || limit=(-max_total_time=20)
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is not installed: cargo install cargo-fuzz --locked"; exit 2; }
export RUSTC_BOOTSTRAP=1
flags=(--fuzz-dir fuzz -O -a -s none)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list --fuzz-dir fuzz)
cargo fuzz build "${flags[@]}" 2>&1 | tail -1
# A target's field in fuzz/harness/src/targets/mod.rs (one `Target { .. }` per line).
field_of() { grep "name: \"$1\"" fuzz/harness/src/targets/mod.rs | grep -oE "$2: \"?[A-Za-z0-9_.]+" | head -1 | sed -E "s/^$2: \"?//"; }
mkdir -p target
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  # A fresh working corpus starts from the minimised one committed (scripts/fuzz-corpus.sh).
  if [ -z "$(ls -A "fuzz/corpus/$t")" ] && [ -f "fuzz/corpus-min/$t.tar.gz" ]; then
    tar -xzf "fuzz/corpus-min/$t.tar.gz" -C "fuzz/corpus/$t"
  fi
  log="target/fuzz-$t.log"
  start=$(date +%s)
  extra=(); [ -d "fuzz/regressions/$t" ] && extra=("fuzz/regressions/$t")
  if cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" "${extra[@]}" -- \
      -dict="fuzz/dict/$(field_of "$t" dict)" -max_len="$(field_of "$t" max_len)" "${limit[@]}" \
      -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -1)
    echo "fuzz $t: $runs runs in $(( $(date +%s) - start ))s, $speed exec/s, $cov"
  else
    status=1
    echo "fuzz $t: CRASH (log: $log)"; grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  fi
done
exit $status
