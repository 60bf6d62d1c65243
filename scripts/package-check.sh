#!/usr/bin/env bash
# Packages every published crate of the workspace and builds each from its own tarball, in dependency order,
# against the others' tarballs (`cargo package` with its verify build: what `cargo publish` would check). Takes
# minutes on 2 cores (every dependency is built again under target/package); the test command runs the packaging
# only (`--no-verify`). Opt-in; not part of ./scripts/test.sh.
#
# Usage: scripts/package-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
cargo package --workspace --exclude mooncake-fuzz-harness --locked --allow-dirty
echo "package-check: every crate packaged and built from its tarball in $(( SECONDS - start )) s"
