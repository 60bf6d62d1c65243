#!/usr/bin/env bash
# Reviews a wire change of vLLM's MooncakeConnector straight from vLLM's source: both sides are extracted
# (`mooncake-conformance extract`, static reading, no vLLM import) and compared (`mooncake-conformance diff`);
# the Markdown report is what the GitHub Action (action.yml) posts on the pull request and what the pre-commit
# hook prints. Shipped in the wheel (`python -m mooncake_wire review ARGS` runs it).
#
# Usage: python -m mooncake_wire review (--old SRC | --old-ref REF) --new SRC [--out FILE] [--announced]
#                                [--bin PATH] [--python PY]
#   SRC          a vLLM checkout, the connector's package folder, a .py file or a wheel
#   --old-ref    a commit of the vLLM repository that --new is a work tree of (the pull request's base): its
#                connector files are exported with `git archive`; when no file under the connector's paths
#                differs between REF and the work tree, the report says so and nothing is extracted
#   --announced  the breaking change is announced (a label or a line of the pull request): report, exit 0
#   --bin        mooncake-conformance to run (default: on PATH)
# Exit codes: 0 no breaking change and nothing the spec lacks (or announced, or no connector file changed); 1 an
# unannounced breaking change, or a struct, enum, reply text, kv_connector_extra_config key or environment
# variable no spec revision describes; 2 bad usage or input; 3 the environment failed (no mooncake-conformance,
# no python3, git failed).
set -uo pipefail
old="" old_ref="" new="" out="" announced=0 bin="mooncake-conformance" python="${MOONCAKE_PYTHON:-python3}"
while [ $# -gt 0 ]; do
  case "$1" in
    --old) old="$2"; shift 2 ;;
    --old-ref) old_ref="$2"; shift 2 ;;
    --new) new="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --announced) announced=1; shift ;;
    --bin) bin="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "review.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$new" ] || { [ -z "$old" ] && [ -z "$old_ref" ]; } || { [ -n "$old" ] && [ -n "$old_ref" ]; }; then
  echo "review.sh: give --new and one of --old / --old-ref (see --help)" >&2; exit 2
fi
command -v "$bin" >/dev/null 2>&1 || { echo "review.sh: $bin not found (cargo install --locked --path conformance)" >&2; exit 3; }
[ -e "$new" ] || { echo "review.sh: --new $new: no such file or directory" >&2; exit 2; }
export MOONCAKE_PYTHON="$python"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
report="$tmp/report.md"
emit() { if [ -n "$out" ]; then cp "$report" "$out"; else cat "$report"; fi; }
marker="<!-- mooncake-wire-review -->"
paths=(vllm/distributed/kv_transfer/kv_connector/v1/mooncake vllm/distributed/kv_transfer/kv_connector/v1/mooncake_connector.py)

if [ -n "$old_ref" ]; then
  git -C "$new" rev-parse --verify --quiet "$old_ref^{commit}" >/dev/null \
    || { echo "review.sh: --old-ref $old_ref: no such commit in $new (fetch it: git fetch origin $old_ref)" >&2; exit 2; }
  if git -C "$new" diff --quiet "$old_ref" -- "${paths[@]}"; then
    printf '%s\n## Mooncake wire review\n\nNo file under `%s/` changed: the wire is unchanged.\n' "$marker" "${paths[0]}" > "$report"
    emit; exit 0
  fi
  mkdir -p "$tmp/old"
  # The connector, what its aliases import (kv_connector/utils.py) and the environment variables' declarations
  # (vllm/envs.py, when the commit has it), as of the base commit.
  extra=()
  git -C "$new" cat-file -e "$old_ref:vllm/envs.py" 2>/dev/null && extra+=(vllm/envs.py)
  git -C "$new" archive "$old_ref" -- vllm/distributed/kv_transfer "${extra[@]}" | tar -x -C "$tmp/old" \
    || { echo "review.sh: git archive $old_ref failed" >&2; exit 3; }
  old="$tmp/old"
  old_label="\`$old_ref\`"
else
  old_label="\`$(basename "$old")\`"
fi
new_label="\`$(basename "$(cd "$(dirname "$new")" && pwd)/$(basename "$new")")\`"

"$bin" diff "$old" "$new" --format markdown > "$tmp/diff.md" 2> "$tmp/diff.err"
rc=$?
case $rc in
  0|1) ;;
  *) cat "$tmp/diff.err" >&2; echo "review.sh: mooncake-conformance diff failed (exit $rc)" >&2; exit "$rc" ;;
esac
for side in old new; do
  src=${!side}
  "$bin" extract "$src" --format summary > "$tmp/$side.summary" 2> "$tmp/$side.notes" || { cat "$tmp/$side.notes" >&2; exit 2; }
done
{
  echo "$marker"
  echo "## Mooncake wire review: $old_label → $new_label"
  echo
  # Exit 1 is a breaking change, or something no spec revision describes (rows marked "in no spec revision").
  if grep -q 'in no spec revision' "$tmp/diff.md"; then
    what="adds to the wire what no revision of the Mooncake wire spec describes (marked rows: review them, then describe them in a spec revision)"
  else
    what="breaks a direction of a mixed deployment"
  fi
  if [ $rc -eq 1 ] && [ $announced -eq 1 ]; then
    echo "**This change $what; the pull request announces it.**"
  elif [ $rc -eq 1 ]; then
    echo "**This change $what, and is not announced** (label the pull request, or say so in its description, once it is intended)."
  elif grep -q '^| 1 |' "$tmp/diff.md"; then
    echo "This change touches the wire; no direction of a mixed deployment breaks."
  else
    echo "No wire change."
  fi
  echo
  sed '/^<!--.*-->$/d' "$tmp/diff.md"
  echo
  echo "<details><summary>How each side was read (static reading of vLLM's source; not derived facts)</summary>"
  echo
  for side in old new; do
    echo "* $side: $(sed 's/^.*: vllm-extracted/vllm-extracted/' "$tmp/$side.summary")"
    sed 's/^/  * /' "$tmp/$side.notes"
  done
  echo
  echo "</details>"
} > "$report"
emit
if [ $rc -eq 1 ] && [ $announced -eq 0 ]; then exit 1; fi
exit 0
