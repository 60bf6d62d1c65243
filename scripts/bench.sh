#!/usr/bin/env bash
# Codec benchmarks against msgspec in one invocation; writes its section of BENCHMARKS.md (between the
# <!-- codec-bench:begin --> / <!-- codec-bench:end --> markers; the rest of the file is left as it is).
#
#   ./scripts/bench.sh           full run (about 6 minutes on 2 cores)
#   ./scripts/bench.sh --quick   short smoke run (numbers are rough; BENCHMARKS.md is still written)
#
# Steps: build bench/ (its own cargo workspace, so `cargo test --workspace` never builds criterion), write the
# shared payloads, time msgspec on them, run the criterion benches (codec, trace validation), time msgspec
# again (the best of both runs is used), measure heap per decoded message, profile the production operations
# (perf, if it works here), and render the report. The
# machine's load average is sampled at each step and printed in the report. Last step: round trips through the
# reference prefiller against the libzmq floor and the Python peer (scripts/roundtrip-bench.sh, its own section
# between the roundtrip-bench markers and benchmarks/roundtrip-*.svg; about 5 more minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$(date +%s)
quick=0
[ "${1:-}" = "--quick" ] && quick=1

[ -n "${MOONCAKE_PYTHON:-}" ] || MOONCAKE_PYTHON=$(scripts/oracle-venv.sh)
export CARGO_TARGET_DIR="$root/target" CRITERION_HOME="$root/target/criterion"
out=target/bench
rm -rf "$out" "$CRITERION_HOME"
mkdir -p "$out"
loads=()
sample_load() { loads+=("$1: $(cut -d' ' -f1-3 /proc/loadavg)"); }

echo "== build (bench/, release)"
(cd bench && cargo build --release --locked --bins --benches)
"$root/target/release/payloads" "$out/payloads"

if [ $quick = 1 ]; then
  crit=(--warm-up-time 0.2 --measurement-time 0.5)
  py=(--repeat 3 --min-time 0.02)
else
  crit=()
  py=(--repeat 15 --min-time 0.1)
fi

sample_load "start"
echo "== msgspec (1/2)"
"$MOONCAKE_PYTHON" bench/msgspec_bench.py "$out/payloads" "$out/msgspec-1.json" "${py[@]}"
sample_load "criterion"
echo "== criterion: codec"
(cd bench && cargo bench --locked --bench codec -- "${crit[@]}") > "$out/criterion-codec.txt"
grep -E "^[a-z_]+/|time:" "$out/criterion-codec.txt" | paste - - | awk '{printf "%-42s %s %s\n", $1, $5, $6}'
echo "== criterion: trace validation"
(cd bench && cargo bench --locked --bench validate -- "${crit[@]}") > "$out/criterion-validate.txt"
grep -E "^[a-z_0-9]+/|time:" "$out/criterion-validate.txt" | paste - - | awk '{printf "%-42s %s %s\n", $1, $5, $6}'
sample_load "msgspec again"
echo "== msgspec (2/2)"
"$MOONCAKE_PYTHON" bench/msgspec_bench.py "$out/payloads" "$out/msgspec-2.json" "${py[@]}"
echo "== heap per decoded message"
"$root/target/release/peak_alloc" > "$out/alloc.json"
sample_load "end"
# Profiles of the production operations that have a target (the report shows those below it). cpu-clock: the
# hardware counters are often not available in a VM.
profiles=()
if command -v perf >/dev/null && perf record -e cpu-clock -o /dev/null true >/dev/null 2>&1; then
  echo "== perf profiles (production)"
  mkdir -p "$out/profiles"
  for id in metadata_production response_production; do
    [ $id = metadata_production ] && n=4000 || n=200000
    for op in typed_decode typed_ref_decode typed_encode spec_decode; do
      perf record -q -e cpu-clock -F 2000 -o "$out/profiles/$id-$op.data" "$root/target/release/hot" $op $id $n >/dev/null 2>&1
      perf report -q -i "$out/profiles/$id-$op.data" --no-children --stdio --sort dso,symbol 2>/dev/null \
        | grep -E '^ +[0-9]' > "$out/profiles/$id-$op.txt" || true
    done
  done
  profiles=(--profiles "$out/profiles")
fi

# Issue 17: the small messages' spec-driven rows are a few hundred ns, where a sampling profile says little.
# callgrind counts instructions per operation (exact whatever else the machine does); the report shows them
# for the rows below their target.
if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null; then
  echo "== callgrind (small messages, spec-driven)"
  mkdir -p "$out/profiles"
  n=20000
  for id in metadata_small response_small; do
    for op in spec_decode spec_encode typed_decode typed_encode; do
      valgrind --tool=callgrind --callgrind-out-file="$out/profiles/$id-$op.callgrind" --toggle-collect='hot::run_*' \
        "$root/target/release/hot" $op $id $n >/dev/null 2>&1 || continue
      { echo "iterations $n"; callgrind_annotate --auto=no --inclusive=no "$out/profiles/$id-$op.callgrind" 2>/dev/null; } \
        > "$out/profiles/$id-$op.callgrind.txt"
    done
  done
  profiles=(--profiles "$out/profiles")
fi

"$MOONCAKE_PYTHON" bench/report.py --criterion "$CRITERION_HOME" --msgspec "$out/msgspec-1.json" "$out/msgspec-2.json" \
  --alloc "$out/alloc.json" --manifest "$out/payloads/manifest.json" --load "${loads[@]}" \
  --duration "$(( $(date +%s) - start )) s$([ $quick = 1 ] && echo ', --quick' || true)" --out BENCHMARKS.md --json "$out/results.json" "${profiles[@]}"
echo "BENCHMARKS.md written ($(( $(date +%s) - start )) s)"

# Issue 16: the generated typed decode of the production pull in every generation-2 revision against msgspec
# with that revision's class (its own section of BENCHMARKS.md, between the typed-revisions-bench markers).
echo "== typed decode per revision"
rstart=$(date +%s)
rloads=("start: $(cut -d' ' -f1-3 /proc/loadavg)")
"$root/target/release/revision_payloads" "$out/revisions"
"$MOONCAKE_PYTHON" bench/msgspec_revisions.py "$out/revisions" "$out/msgspec-revisions-1.json" "${py[@]}"
rloads+=("criterion: $(cut -d' ' -f1-3 /proc/loadavg)")
(cd bench && cargo bench --locked --bench revisions -- "${crit[@]}") > "$out/criterion-revisions.txt"
grep -E "^[a-z_0-9]+/|time:" "$out/criterion-revisions.txt" | paste - - | awk '{printf "%-48s %s %s\n", $1, $5, $6}'
rloads+=("msgspec again: $(cut -d' ' -f1-3 /proc/loadavg)")
"$MOONCAKE_PYTHON" bench/msgspec_revisions.py "$out/revisions" "$out/msgspec-revisions-2.json" "${py[@]}"
rloads+=("end: $(cut -d' ' -f1-3 /proc/loadavg)")
(cd bench && "$MOONCAKE_PYTHON" revisions_report.py --criterion "$CRITERION_HOME" \
  --msgspec "$root/$out/msgspec-revisions-1.json" "$root/$out/msgspec-revisions-2.json" \
  --manifest "$root/$out/revisions/manifest.json" --load "${rloads[@]}" \
  --duration "$(( $(date +%s) - rstart )) s$([ $quick = 1 ] && echo ', --quick' || true)" \
  --out "$root/BENCHMARKS.md" --json "$root/$out/revisions-results.json")
echo "BENCHMARKS.md: per-revision section written ($(( $(date +%s) - rstart )) s)"

echo "== round trips through the reference prefiller"
MOONCAKE_PYTHON="$MOONCAKE_PYTHON" scripts/roundtrip-bench.sh $([ $quick = 1 ] && echo --quick || true)
echo "bench.sh done ($(( $(date +%s) - start )) s)"
