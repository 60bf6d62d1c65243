#!/usr/bin/env bash
# Take in a new vLLM release: everything the repository can do by itself, then what is left by hand.
#
#   scripts/intake.sh --release X [--base REVISION] [--skip-record] [--skip-vectors] [--jobs N]
#
# 1. downloads the release's wheel (into $MOONCAKE_WHEELS, default ~/.cache/mooncake-wire/wheels);
# 2. `mooncake-conformance diff NEWEST <wheel>`: what changed against the newest bundled revision (or --base),
#    classified per direction; exit 1 there means a break or something no revision describes;
# 3. `mooncake-conformance extract <wheel> --base NEWEST`: writes the draft revision spec/push/vllm-X.toml (its
#    `not derived` lines are part of what is left by hand); with no change at all, says to add X to the newest
#    revision instead and keeps no draft;
# 4. rebuilds the binaries (the spec is compiled in) and regenerates schema/ (BLESS=1 cargo test --test generated);
# 5. records every scenario that applies to X from X's own code (scripts/record.sh; opt-in heavy environment:
#    vLLM with torch, ~10 minutes and 9.4 GB the first time) into conformance/traces/vllm-X/;
# 6. generates X's golden vectors from its own code: msgspec (scripts/gen-vectors.sh), planner
#    (scripts/gen-plan-vectors.sh), store keys, lookup frames and the NIXL hash (tools/golden/gen_store_034.py,
#    which runs as far as X's functions keep 0.34.0's shape);
# 7. checks: `vectors`, `validate` of the new traces, `run` of the new traces against the reference peer, and the
#    compatibility matrix of X against the previous revision;
# 8. prints what was written, what failed, and what is left to write by hand.
#
# Nothing is committed. Exit status: 0 when every step ran and every check passed (the draft may still need the
# hand-written part: see the summary), 1 when a check failed (the summary says which), 2 on bad usage, 3 when a
# step could not run (no network for the wheel, no recording environment).
set -uo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
release="" base="" skip_record=0 skip_vectors=0 jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --skip-record) skip_record=1; shift ;;
    --skip-vectors) skip_vectors=1; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "intake.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$release" ] || { echo "intake.sh: --release X is required (see --help)" >&2; exit 2; }
case "$release" in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) echo "intake.sh: --release $release is not a vLLM version (X.Y.Z)" >&2; exit 2 ;;
esac

start=$(date +%s)
wheels="${MOONCAKE_WHEELS:-$HOME/.cache/mooncake-wire/wheels}"
work="$repo/target/intake/vllm-$release"
mkdir -p "$wheels" "$work"
log="$work/intake.log"
: > "$log"
bin="$repo/target/debug/mooncake-conformance"
written=() failed=() by_hand=() notes=()
step() { echo "== $* (at $(( $(date +%s) - start ))s)" | tee -a "$log"; }
# Runs a command, keeping its output in the log (and on the terminal); returns its status.
run() { "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }

# 1. The wheel.
step "wheel of vLLM $release"
wheel=$(ls "$wheels"/vllm-"$release"-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  run python3 -m pip download --quiet --no-deps --only-binary=:all: "vllm==$release" -d "$wheels" \
    || { echo "intake.sh: cannot download vllm==$release (see $log)" >&2; exit 3; }
  wheel=$(ls "$wheels"/vllm-"$release"-*.whl | head -1)
fi
echo "wheel: $wheel" | tee -a "$log"

step "build (debug; the spec is compiled in)"
run cargo build --quiet -p mooncake-conformance -p mooncake-reference || { echo "intake.sh: the build failed" >&2; exit 3; }

# The newest push revision: the file whose last release is the highest.
newest=$(ls spec/push/vllm-*.toml | python3 -c '
import re, sys
def key(p):
    return tuple(int(x) for x in re.findall(r"\d+\.\d+\.\d+", p)[-1].split("."))
print(re.sub(r"^spec/push/|\.toml$", "", max((l.strip() for l in sys.stdin if re.search(r"\d+\.\d+\.\d+", l)), key=key)))')
base="${base:-$newest}"
echo "base revision: $base" | tee -a "$log"
spec_file="spec/push/vllm-$release.toml"
if [ -e "$spec_file" ] || grep -q "\"$release\"" spec/push/*.toml; then
  notes+=("$release is already in spec/push/: the draft is written to $work/draft.toml and not installed")
  spec_out="$work/draft.toml"
else
  spec_out="$spec_file"
fi

# 2. What changed.
step "diff $base → the $release wheel"
run "$bin" diff "$base" "$wheel" > "$work/diff.txt"
diff_status=$?
case $diff_status in
  0) notes+=("diff: no wire change and nothing no revision describes") ;;
  1) notes+=("diff: breaks or additions no revision describes (exit 1): $work/diff.txt") ;;
  *) failed+=("diff exited $diff_status (see $log)") ;;
esac

# 3. The draft revision.
step "extract the $release wheel on $base"
if run "$bin" extract "$wheel" --base "$base" --out "$work/extracted.toml" > "$work/extract.txt"; then
  grep -E '^not derived|not derived:' "$work/extract.txt" "$work/extracted.toml" 2>/dev/null | sed 's/^[^:]*://' | sort -u > "$work/not-derived.txt" || true
  edits=$(grep -c '^\[\[edit\]\]' "$work/extracted.toml" || true)
  if [ "$edits" = 0 ] && [ $diff_status = 0 ]; then
    by_hand+=("no edit: add \"$release\" to the releases and build_commits of spec/push/$base.toml and rename the file to the release range (spec/README.md, \"Adding a revision\")")
  else
    python3 - "$work/extracted.toml" "$spec_out" "$release" "$base" <<'EOF'
import re, sys
src, out, release, base = sys.argv[1:]
text = open(src).read()
# The extractor names an extracted revision after its sources; the draft is the release's revision.
text = re.sub(r'^revision = ".*"$', f'revision = "vllm-{release}"', text, count=1, flags=re.M)
text = re.sub(r'^releases = .*$', f'releases = ["{release}"]', text, count=1, flags=re.M)
text = re.sub(r'^commit = .*\n', '', text, count=1, flags=re.M)
text = re.sub(r'^base = ".*"$', f'base = "{base}"', text, count=1, flags=re.M)
head = ("# DRAFT written by scripts/intake.sh from the vLLM " + release + " wheel: the edits extract could read.\n"
        "# What it could not (behaviour items, which socket a new struct travels on, when a new text is sent)\n"
        "# is listed in target/intake/vllm-" + release + "/not-derived.txt; write it here by hand.\n")
open(out, "w").write(head + text)
EOF
    written+=("$spec_out ($edits edits)")
    by_hand+=("the behaviour of $release in $spec_out: each [behaviour] item whose value changed, read from the wheel (spec/README.md, \"Behaviour items\"); extract cannot read behaviour")
  fi
  [ -s "$work/not-derived.txt" ] && by_hand+=("$(wc -l < "$work/not-derived.txt") facts extract could not derive: $work/not-derived.txt")
  # The build commit, from the wheel's vllm/_version.py.
  commit=$(python3 -c 'import sys, zipfile, re; z = zipfile.ZipFile(sys.argv[1]); t = z.read("vllm/_version.py").decode(); m = re.search(r"commit_id = [\x27\x22](\w+)[\x27\x22]", t); print(m.group(1) if m else "")' "$wheel" 2>/dev/null || true)
  if [ -n "$commit" ] && [ "$spec_out" = "$spec_file" ] && [ -f "$spec_out" ]; then
    if grep -q '^build_commits = ' "$spec_out"; then
      sed -i "s/^build_commits = .*/build_commits = { \"$release\" = \"$commit\" }/" "$spec_out"
    else
      sed -i "s/^releases = .*/&\nbuild_commits = { \"$release\" = \"$commit\" }/" "$spec_out"
    fi
  fi
else
  failed+=("extract failed (see $log)")
fi

# 4. The spec is compiled in: rebuild, regenerate schema/.
if [ "$spec_out" = "$spec_file" ] && [ -f "$spec_file" ]; then
  step "rebuild with the draft revision and regenerate schema/"
  if run cargo build --quiet -p mooncake-conformance -p mooncake-reference; then
    if BLESS=1 cargo test --quiet --test generated > "$work/generated.txt" 2>&1; then
      written+=("schema/push/vllm-$release.md, schema/push/vllm-$release/, schema/push/diff/${base}__vllm-$release.md")
      # Hand-written code may use typed conversions that only a complete revision generates (a new message's,
      # once its transport entry is written): then the regenerated typed code is put back as committed, so the
      # tree still builds (and `BLESS=1 cargo test --test generated` can run again once the draft is complete).
      if ! cargo build --quiet -p mooncake-wire > "$work/build-generated.txt" 2>&1; then
        git checkout -- src/typed/generated
        by_hand+=("the typed code generated from the draft does not build with the hand-written code ($work/build-generated.txt; src/typed/generated/ kept as committed): complete the draft (a new message's transport entry), then BLESS=1 cargo test --test generated")
      fi
    else
      failed+=("the draft revision does not load or generate: $work/generated.txt")
    fi
  else
    failed+=("the build with the draft revision failed (see $log)")
  fi
fi

# 5. Recordings from the release's own code.
traces="conformance/traces/vllm-$release"
if [ $skip_record = 0 ]; then
  step "record every scenario with vLLM $release's own connector (scripts/record.sh)"
  run ./scripts/record.sh --release "$release" --out "$traces"
  case $? in
    0) written+=("$traces/ ($(ls "$traces" | wc -l) traces)") ;;
    1) written+=("$traces/ (some traces have \`error\` set)"); failed+=("recording: a scenario did not run as it should (see $log)") ;;
    *) failed+=("recording: the release cannot be run (see $log)") ;;
  esac
else
  notes+=("recording skipped (--skip-record)")
fi

# 6. Golden vectors from the release's own code.
venv_python="${MOONCAKE_RECORD_CACHE:-$HOME/.cache/mooncake-wire/record}/venv/bin/python"
export MOONCAKE_WHEEL_CACHE="$wheels"
if [ $skip_vectors = 0 ]; then
  step "msgspec vectors (scripts/gen-vectors.sh, with the pinned msgspec of .venv)"
  if oracle=$(./scripts/oracle-venv.sh 2>> "$log"); then
    run ./scripts/gen-vectors.sh --release "$release" --python "$oracle" \
      && written+=("conformance/vectors/vllm-$release/ and its revisions.json row") \
      || failed+=("msgspec vectors (see $log)")
  else
    failed+=("msgspec vectors: the pinned msgspec venv could not be set up (scripts/oracle-venv.sh; see $log)")
  fi
  step "planner vectors (scripts/gen-plan-vectors.sh, numpy from the recording environment)"
  plan_python="${oracle:-python3}"
  [ -x "$venv_python" ] && "$venv_python" -c 'import numpy' 2>/dev/null && plan_python="$venv_python"
  run ./scripts/gen-plan-vectors.sh --release "$release" --python "$plan_python" \
    && written+=("conformance/vectors/plan/*_$release.jsonl") \
    || failed+=("planner vectors (see $log; they need numpy: the recording environment has it)")
  step "store keys, lookup frames, NIXL hash (tools/golden/gen_store_034.py under the $release wheel)"
  if [ -x "$venv_python" ]; then
    unpacked="$work/wheel"
    rm -rf "$unpacked" && python3 -m zipfile -e "$wheel" "$unpacked" && find "$unpacked/vllm" -name '*.so' -delete
    if PYTHONPATH="$unpacked" run "$venv_python" tools/golden/gen_store_034.py --release "$release"; then
      written+=("conformance/vectors/{keys,hash,lookup}/*_$release.jsonl")
    else
      by_hand+=("store/lookup/hash golden vectors: tools/golden/gen_store_034.py did not run through for $release (its functions changed shape; see $log): extend the generator")
    fi
  else
    failed+=("store/lookup/hash golden vectors: no recording environment ($venv_python); run scripts/record.sh once")
  fi
fi

# 7. Checks.
step "checks: vectors, validate, run, matrix"
run cargo build --quiet -p mooncake-conformance -p mooncake-reference || failed+=("the build before the checks (see $log)")
run "$bin" vectors conformance/vectors > "$work/vectors.txt" || failed+=("vectors: $(tail -1 "$work/vectors.txt")")
if [ -d "$traces" ]; then
  run "$bin" validate "$traces" > "$work/validate.txt" || failed+=("validate $traces: $(tail -1 "$work/validate.txt")")
  run "$bin" run --progress off --jobs "$jobs" "$traces" > "$work/run.txt"
  rs=$?
  if [ $rs -ne 0 ]; then
    failed+=("run $traces: $(tail -1 "$work/run.txt")")
    by_hand+=("failing cases are behaviour the spec does not say yet, or a core that does not follow it: $work/run.txt")
  fi
  if [ "$spec_out" = "$spec_file" ]; then
    # The traces on disk (the binary embeds the ones it was built with).
    run "$bin" matrix --revision "$base,$release" conformance/traces > "$work/matrix.txt" \
      || failed+=("matrix $base × $release: $(tail -1 "$work/matrix.txt")")
    grep -q ' 0 ordered pairs' "$work/matrix.txt" && failed+=("matrix $base × $release: no pair observed ($work/matrix.txt)")
  fi
fi

# 8. Summary.
echo
echo "== intake of vLLM $release: $(( $(date +%s) - start ))s; log and reports in $work"
echo "written:"; for w in "${written[@]}"; do echo "  - $w"; done
[ ${#notes[@]} -gt 0 ] && { echo "notes:"; for n in "${notes[@]}"; do echo "  - $n"; done; }
echo "left by hand:"
for b in "${by_hand[@]}"; do echo "  - $b"; done
echo "  - PROTOCOL.md prose for what changed; CHANGELOG.md; the release's row in the README's tables"
echo "  - new scenarios for new behaviour (conformance/scenarios.toml), then this script again"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed:"; for f in "${failed[@]}"; do echo "  - $f"; done
  echo "intake: FAILED (${#failed[@]} steps)"
  exit 1
fi
echo "intake: every step ran and every check passed"
