#!/bin/bash -eu
# projects/mooncake-wire/build.sh for google/oss-fuzz: the repository's own build script, so OSS-Fuzz and
# ClusterFuzzLite build the targets the same way.
exec "$SRC/mooncake-wire/.clusterfuzzlite/build.sh"
