#!/bin/bash -eu
# Builds every cargo-fuzz target of fuzz/ for ClusterFuzzLite and OSS-Fuzz (both run this script in their
# base-builder-rust image, with $SRC, $OUT, $WORK, $SANITIZER, $FUZZING_ENGINE, $RUSTFLAGS set) and for
# scripts/cflite-local.sh, which sets the same environment on a machine without Docker.
#
# For each target it leaves in $OUT: the binary, <target>_seed_corpus.zip (fuzz/seeds/<target>, the
# regression inputs of fuzz/regressions/<target> and the minimised corpus fuzz/corpus-min/<target>.tar.gz), <target>.dict and <target>.options (its libFuzzer
# -max_len and dictionary, read from fuzz/harness/src/targets/mod.rs, the same source scripts/fuzz-smoke.sh
# reads).
#
# Sanitizer: cargo-fuzz's -s, from $SANITIZER (address, the only one the engines offer for Rust; `coverage`
# builds are made by the base image's cargo wrapper). Debug assertions on (--debug-assertions), so an
# arithmetic overflow panics, as in scripts/fuzz-smoke.sh. On a stable rustc (the project's toolchain) the
# nightly-only -Z flags cargo-fuzz passes are accepted with RUSTC_BOOTSTRAP=1; the engines' images have a
# nightly rustc, for which the variable changes nothing.
cd "$SRC/mooncake-wire"
export RUSTC_BOOTSTRAP=1
sanitizer="${SANITIZER:-address}"
case "$sanitizer" in
  address|none) san=(-s "$sanitizer") ;;
  coverage) san=() ;;  # the base image's cargo wrapper turns `cargo fuzz build` into an instrumented build
  *) echo "build.sh: sanitizer $sanitizer is not supported for Rust (address, coverage)"; exit 2 ;;
esac
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^mooncake-wire-fuzz$')
cargo fuzz build --fuzz-dir fuzz -O --debug-assertions "${san[@]}"
bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
# A target's field in fuzz/harness/src/targets/mod.rs (one `Target { .. }` per line).
field_of() { grep "name: \"$1\"" fuzz/harness/src/targets/mod.rs | grep -oE "$2: \"?[A-Za-z0-9_.]+" | head -1 | sed -E "s/^$2: \"?//"; }
for t in $targets; do
  cp "$bin_dir/$t" "$OUT/$t"
  dict=$(field_of "$t" dict)
  max_len=$(field_of "$t" max_len)
  [ -n "$dict" ] && [ -n "$max_len" ] || { echo "build.sh: $t has no entry in fuzz/harness/src/targets/mod.rs"; exit 1; }
  cp "fuzz/dict/$dict" "$OUT/$t.dict"
  printf '[libfuzzer]\nmax_len = %s\ndict = %s.dict\ntimeout = 10\nrss_limit_mb = 2048\n' "$max_len" "$t" > "$OUT/$t.options"
  rm -f "$OUT/${t}_seed_corpus.zip"
  seeds=("fuzz/seeds/$t")
  [ -d "fuzz/regressions/$t" ] && seeds+=("fuzz/regressions/$t")
  if [ -f "fuzz/corpus-min/$t.tar.gz" ]; then
    mkdir -p "$WORK/corpus-min/$t"
    tar -xzf "fuzz/corpus-min/$t.tar.gz" -C "$WORK/corpus-min/$t"
    seeds+=("$WORK/corpus-min/$t")
  fi
  zip -q -j -r "$OUT/${t}_seed_corpus.zip" "${seeds[@]}"
done
echo "build.sh: built $(echo $targets | wc -w) targets into $OUT: $(echo $targets)"
