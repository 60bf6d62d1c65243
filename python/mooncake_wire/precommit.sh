#!/usr/bin/env bash
# The pre-commit hook (`python -m mooncake_wire precommit`; tools/pre-commit-mirror/): the wire diff between HEAD and the work tree (pre-commit has
# stashed what is not staged, so the work tree is what the commit will hold). MOONCAKE_WIRE_BREAK=1 announces
# an intended breaking change. Exit codes as review.sh (beside this file).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
announced=()
[ "${MOONCAKE_WIRE_BREAK:-0}" = 1 ] && announced=(--announced)
git rev-parse --verify --quiet HEAD >/dev/null || { echo "mooncake-wire-review: no HEAD commit yet: nothing to compare"; exit 0; }
exec bash "$here/review.sh" --old-ref HEAD --new "$(git rev-parse --show-toplevel)" "${announced[@]}" "$@"
