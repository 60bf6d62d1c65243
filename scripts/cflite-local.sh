#!/usr/bin/env bash
# Proves .clusterfuzzlite/build.sh (the build script ClusterFuzzLite and OSS-Fuzz run) on a machine without
# Docker: sets the environment the engine's `compile` step sets for a Rust project with AddressSanitizer ($SRC,
# $OUT, $WORK, SANITIZER, FUZZING_ENGINE, FUZZING_LANGUAGE, ARCHITECTURE and its RUSTFLAGS), puts a copy of the
# checkout at $SRC/mooncake-wire as the image's Dockerfile does, runs build.sh, then runs every target it built
# the way the engine's fuzzing step does: from its seed corpus (<target>_seed_corpus.zip unpacked), with the
# options of <target>.options (dictionary, -max_len, -timeout, -rss_limit_mb), for SECONDS each.
#
#   scripts/cflite-local.sh [-time SECONDS] [target...]      default: 60 s, every target build.sh built
#
# Differences from the engine's image, by necessity: the rustc is the project's stable one with
# RUSTC_BOOTSTRAP=1 (the image has a nightly; build.sh sets the variable either way), and libFuzzer is the one
# libfuzzer-sys compiles with the host's C++ compiler (the image links its own clang-built libFuzzer through
# CUSTOM_LIBFUZZER_PATH; there is no clang here). Needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and zip.
# Leaves everything in target/cflite/ (src/, out/, work/, one log per target); exits non-zero when the build
# fails or any target crashes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=60
if [ "${1:-}" = "-time" ]; then seconds="$2"; shift 2; fi
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is not installed: cargo install cargo-fuzz --locked"; exit 3; }
command -v zip >/dev/null && command -v unzip >/dev/null || { echo "zip and unzip are needed"; exit 3; }
base="${CFLITE_DIR:-$root/target/cflite}"
export SRC="$base/src" OUT="$base/out" WORK="$base/work"
export SANITIZER=address FUZZING_ENGINE=libfuzzer FUZZING_LANGUAGE=rust ARCHITECTURE=x86_64
# What infra/base-images/base-builder/compile exports for Rust with a sanitizer other than undefined/coverage.
export RUSTFLAGS="--cfg fuzzing -Zsanitizer=${SANITIZER} -Cdebuginfo=1 -Cforce-frame-pointers"
mkdir -p "$SRC" "$OUT" "$WORK"
# The checkout as `COPY . $SRC/mooncake-wire` leaves it (.dockerignore honoured: no build outputs); the
# target directory of earlier runs is kept so a second run rebuilds only what changed.
mkdir -p "$SRC/mooncake-wire"
(cd "$root" && git ls-files -co --exclude-standard -z | grep -zv '^fuzz/corpus/' | tar --null -T - -cf -) \
  | tar -C "$SRC/mooncake-wire" -xf -
cp "$root/.clusterfuzzlite/build.sh" "$SRC/build.sh"
start=$(date +%s)
(cd "$SRC" && bash -eu "$SRC/build.sh") > "$base/build.log" 2>&1 || { tail -30 "$base/build.log"; echo "cflite-local: build.sh FAILED (log: $base/build.log)"; exit 1; }
echo "cflite-local: build.sh ok in $(( $(date +%s) - start ))s: $(tail -1 "$base/build.log")"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$OUT"/*.options; do targets+=("$(basename "$f" .options)"); done
fi
status=0
for t in "${targets[@]}"; do
  [ -x "$OUT/$t" ] || { echo "cflite-local: $t was not built"; status=1; continue; }
  corpus="$WORK/corpus/$t"
  rm -rf "$corpus"; mkdir -p "$corpus"
  unzip -q -o "$OUT/${t}_seed_corpus.zip" -d "$corpus"
  opts=()
  while IFS='=' read -r k v; do
    k="$(echo "$k" | tr -d ' ')"; v="$(echo "$v" | tr -d ' ')"
    [ -n "$k" ] && [ -n "$v" ] && [ "${k:0:1}" != "[" ] || continue
    [ "$k" = dict ] && v="$OUT/$v"
    opts+=("-$k=$v")
  done < "$OUT/$t.options"
  log="$base/run-$t.log"
  seeds=$(ls "$corpus" | wc -l)
  if (cd "$WORK" && "$OUT/$t" "${opts[@]}" -max_total_time="$seconds" -print_final_stats=1 "$corpus") > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+' "$log" | tail -1)
    echo "cflite-local $t: $seeds seeds, $runs runs in ${seconds}s, $speed exec/s, $cov"
  else
    status=1
    echo "cflite-local $t: CRASH or error (log: $log)"; grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  fi
done
exit $status
