#!/usr/bin/env bash
# The minimised fuzz corpora kept in the repository, one archive per target: fuzz/corpus-min/<target>.tar.gz.
# A fresh machine (CI, a new session, ClusterFuzzLite) starts from what earlier runs found instead of from
# the seeds alone; fuzz/corpus/<target> (the working corpus, not committed) grows from there.
#
#   scripts/fuzz-corpus.sh save [target...]      minimise fuzz/corpus/<target> (libFuzzer -merge=1: the
#                                                smallest set of inputs with the same coverage features)
#                                                into fuzz/corpus-min/<target>.tar.gz
#   scripts/fuzz-corpus.sh restore [target...]   unpack fuzz/corpus-min/<target>.tar.gz into fuzz/corpus/<target>
#                                                (libFuzzer names inputs by their SHA-1: nothing is overwritten
#                                                with different bytes)
#   scripts/fuzz-corpus.sh list                  what each archive holds (inputs, bytes)
#
# Default targets: every archive there is (restore, list) or every target with a working corpus (save).
# `save` needs the targets built (scripts/fuzz-smoke.sh builds them). Packing is deterministic (sorted names,
# fixed owner and time, gzip -n), but libFuzzer's merge is not quite: a second save of the same corpus may
# keep a different, equally covering set (seen: 2,858 then 2,839 inputs). Save after a long run, not after
# every run, so the archive changes only when a run added something.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-}"
[ $# -gt 0 ] && shift
mkdir -p fuzz/corpus-min
archive() { echo "fuzz/corpus-min/$1.tar.gz"; }
pack() { # dir target
  (cd "$1" && find . -maxdepth 1 -type f -printf '%P\n' | LC_ALL=C sort |
    tar --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' -cf - -T - | gzip -n -9) > "$(archive "$2").tmp"
  mv "$(archive "$2").tmp" "$(archive "$2")"
}
case "$cmd" in
  save)
    targets=("$@")
    if [ ${#targets[@]} -eq 0 ]; then
      for d in fuzz/corpus/*/; do [ -n "$(ls -A "$d" 2>/dev/null)" ] && targets+=("$(basename "$d")"); done
    fi
    [ ${#targets[@]} -gt 0 ] || { echo "fuzz-corpus: no working corpus under fuzz/corpus/"; exit 2; }
    bin=fuzz/target/x86_64-unknown-linux-gnu/release
    for t in "${targets[@]}"; do
      [ -x "$bin/$t" ] || { echo "fuzz-corpus: $bin/$t is not built (scripts/fuzz-smoke.sh -runs 1 $t builds it)"; exit 2; }
      [ -d "fuzz/corpus/$t" ] || { echo "fuzz-corpus: fuzz/corpus/$t does not exist"; exit 2; }
      out=$(mktemp -d)
      # Merge the working corpus, the committed seeds and the archive already here: nothing any of them
      # covers is lost.
      old=$(mktemp -d)
      [ -f "$(archive "$t")" ] && tar -xzf "$(archive "$t")" -C "$old"
      "$bin/$t" -merge=1 -timeout=10 -rss_limit_mb=2048 "$out" "fuzz/corpus/$t" "fuzz/seeds/$t" "$old" \
        > "target/fuzz-corpus-$t.log" 2>&1 || { echo "fuzz-corpus: merge of $t failed (target/fuzz-corpus-$t.log)"; exit 1; }
      pack "$out" "$t"
      echo "fuzz-corpus: $t: $(ls "fuzz/corpus/$t" | wc -l) inputs -> $(ls "$out" | wc -l) ($(du -sk "$out" | cut -f1) KiB, archive $(( $(stat -c %s "$(archive "$t")") / 1024 )) KiB)"
      rm -rf "$out" "$old"
    done
    ;;
  restore)
    targets=("$@")
    [ ${#targets[@]} -gt 0 ] || for a in fuzz/corpus-min/*.tar.gz; do [ -f "$a" ] && targets+=("$(basename "$a" .tar.gz)"); done
    for t in "${targets[@]}"; do
      [ -f "$(archive "$t")" ] || { echo "fuzz-corpus: no archive for $t"; exit 2; }
      mkdir -p "fuzz/corpus/$t"
      before=$(ls "fuzz/corpus/$t" | wc -l)
      tar -xzf "$(archive "$t")" -C "fuzz/corpus/$t"
      echo "fuzz-corpus: $t: fuzz/corpus/$t has $(ls "fuzz/corpus/$t" | wc -l) inputs ($before before)"
    done
    ;;
  list)
    for a in fuzz/corpus-min/*.tar.gz; do
      [ -f "$a" ] || continue
      echo "$(basename "$a" .tar.gz): $(tar -tzf "$a" | wc -l) inputs, $(( $(stat -c %s "$a") / 1024 )) KiB compressed"
    done
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = "-h" ] || [ "$cmd" = "--help" ] || exit 2
    ;;
esac
