#!/usr/bin/env bash
# CI step: when spec/ differs from the main branch, print the wire diff of every revision that changed
# (`mooncake-conformance diff`: a Markdown table ready for a PR comment; also written to target/spec-diff.md).
#
# Informational: a breaking change does not fail this step (--allow-breaking) — the report is for the
# reviewer. It does nothing without git history, without a main branch, or when spec/ did not change, and it
# fails only on a real error (a spec that does not load, a missing binary).
#
# Usage: scripts/spec-diff.sh [path/to/mooncake-conformance]
# The base is $SPEC_DIFF_BASE if set, else origin/main, else main; spec/ is compared as it is in the working
# tree against its state at the merge base with that branch.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/mooncake-conformance}"
out="target/spec-diff.md"
say() { echo "spec-diff: $*"; }

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1 || ! git rev-parse --verify -q HEAD >/dev/null; then
  say "no git history; nothing to compare"
  exit 0
fi
base=""
for ref in ${SPEC_DIFF_BASE:-} origin/main main; do
  if git rev-parse --verify -q "$ref^{commit}" >/dev/null; then
    base="$ref"
    break
  fi
done
if [ -z "$base" ]; then
  say "no main branch; nothing to compare"
  exit 0
fi
if ! mb=$(git merge-base "$base" HEAD 2>/dev/null); then
  say "no history in common with $base (shallow clone?); nothing to compare"
  exit 0
fi

# Changed wire-revision files: status and path (renames as "R old new"); untracked files count as added.
changes=$( { git diff --name-status -M "$mb" -- spec/ | awk -F'\t' '{ s = substr($1, 1, 1); if (s == "R") print "R\t" $2 "\t" $3; else print s "\t" $2 }';
             git ls-files --others --exclude-standard -- spec/ | awk '{ print "A\t" $0 }'; } | grep -E '\.toml$' || true)
if [ -z "$changes" ]; then
  say "spec/ unchanged since $base ($(git rev-parse --short "$mb")); nothing to report"
  exit 0
fi
if [ ! -x "$bin" ]; then
  echo "spec-diff: $bin is not built" >&2
  exit 2
fi

key() { sed -n "s/^$1 *= *\"\\(.*\\)\".*/\\1/p" | head -1; }
is_revision() { grep -q '^format *= *"mooncake-wire-spec/2"'; }

mkdir -p target
: > "$out"
status=0
skipped=0
while IFS=$'\t' read -r st path newpath; do
  [ "$st" = "R" ] && { old_path="$path"; path="$newpath"; } || old_path="$path"
  if [ "$st" = "D" ]; then
    rev=$(git show "$mb:$old_path" | key revision)
    say "revision $rev removed ($old_path)" | tee -a "$out"
    continue
  fi
  is_revision < "$path" || { say "$path is not a wire revision file; skipped"; continue; }
  rev=$(key revision < "$path")
  old_rev=""
  old_format=$(git show "$mb:$old_path" 2>/dev/null | key format || true)
  if [ -n "$old_format" ] && [ "$old_format" != "$(key format < "$path")" ]; then
    say "$path: $rev — not compared: it is in spec format $old_format at $base, $(key format < "$path") here (this build reads only the latter)" | tee -a "$out"
    skipped=$((skipped + 1))
    continue
  fi
  if git cat-file -e "$mb:$old_path" 2>/dev/null && git show "$mb:$old_path" | is_revision; then
    old_rev=$(git show "$mb:$old_path" | key revision)
  fi
  if [ -n "$old_rev" ]; then
    old="git:$mb#$old_rev"
    what="changed since $base"
  elif based=$(key base < "$path") && [ -n "$based" ]; then
    old="spec#$based"
    what="new, derived from $based"
  else
    old="git:$mb"
    what="new full revision, against the newest revision of $base"
  fi
  say "$path: $rev ($what)"
  set +e
  report=$("$bin" diff --allow-breaking "$old" "spec#$rev")
  code=$?
  set -e
  if [ $code -ne 0 ]; then
    # The base's spec/ may be of a format this build no longer reads (the spec grew typed items): that is no
    # error of this change, and the report is informational. The working tree's revision must load, though.
    if "$bin" diff --allow-breaking "spec#$rev" "spec#$rev" >/dev/null 2>&1; then
      say "cannot compare $rev with $base: its spec/ at $(git rev-parse --short "$mb") does not load with this build (see the error above); skipped" | tee -a "$out"
      skipped=$((skipped + 1))
    else
      echo "spec-diff: mooncake-conformance diff $old spec#$rev failed (exit $code)" >&2
      status=1
    fi
    continue
  fi
  printf '%s\n\n' "$report" | tee -a "$out"
done <<< "$changes"
[ "$skipped" -eq 0 ] || say "$skipped revision(s) not compared: the base's spec/ is of another format or does not load with this build"
exit $status
