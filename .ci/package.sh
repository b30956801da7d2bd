#!/usr/bin/env bash
# The package lane (called by .ci/run as lane 8): the package as users get it.
#
#   .ci/package.sh <report.json> [--zig-prebuilt]
#
# 1. Every platform's prebuild: scripts/prebuild-all.mjs (zig from npm through
#    .ci/zig.sh for Linux and macOS, mingw-w64 from apt for Windows). .ci/run
#    builds the zig part in the background while lane 1 runs, at low priority,
#    and says --zig-prebuilt when that succeeded: then only win32-x64 is built here.
# 2. scripts/verify-prebuilds.mjs, then `npm pack`.
# 3. test/package.test.ts with CORDON_PACKAGE_TGZ naming the tarball: installed
#    into a fresh project with no compiler on PATH, the main job, require from
#    CommonJS, the README's examples under tsc --strict (and every example of
#    README.md and docs/*.md run from the install: test/doc-examples.test.ts); the arm64 prebuild
#    loaded under qemu-user with lane 7's arm64 node and the win32 one run
#    under Wine with lane 4's node.exe and prefix, where those lanes left them.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:?usage: .ci/package.sh <report.json> [--zig-prebuilt]}
REPORT=$(realpath -m "$REPORT")
CACHE=${CORDON_CI_CACHE:-$PWD/.cache}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cordon-package.XXXXXX")
T0=$(date +%s)
stamp() { echo "[package +$(($(date +%s) - T0))s] $*"; }
finish() {
  local rc=$?
  set +e
  [[ -n ${WINEPREFIX:-} ]] && wineserver -k 2>/dev/null
  rm -rf "$WORK"
  if ((rc)) && [[ ! -s $REPORT ]]; then
    printf '%s\n' '{"passed":0,"failed":1,"skipped":0,"numPassedTests":0,"numFailedTests":1,"numPendingTests":0,"numTodoTests":0,"success":false,"testResults":[]}' >"$REPORT"
    echo "package: 0 passed, 1 failed (the lane could not run)"
  fi
  exit "$rc"
}
trap finish EXIT

SUDO=; ((EUID)) && SUDO=sudo
missing=()
command -v x86_64-w64-mingw32-g++-posix >/dev/null || missing+=(g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64)
command -v file >/dev/null || missing+=(file)
if ((${#missing[@]})); then
  stamp "installing ${missing[*]} (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 1. prebuilds
if [[ ${2:-} == --zig-prebuilt ]]; then
  node scripts/prebuild-all.mjs win32-x64
else
  node scripts/prebuild-all.mjs --zig "$(.ci/zig.sh)"
fi
node scripts/verify-prebuilds.mjs

# 2. the tarball
stamp "npm pack"
tgz=$(npm pack --silent --pack-destination "$WORK" | tail -n 1)
export CORDON_PACKAGE_TGZ=$WORK/$tgz
ls -l "$CORDON_PACKAGE_TGZ"

# 3. the test, with the emulated platforms where the earlier lanes left them
arm64_node=$CACHE/node-arm64/package/bin/node
[[ -x $arm64_node ]] && export CORDON_PACKAGE_NODE_ARM64=$arm64_node
if [[ -f $CACHE/win/package/bin/node.exe && -f $CACHE/win/prefix/system.reg ]] && command -v wine >/dev/null; then
  export CORDON_PACKAGE_NODE_WIN=$CACHE/win/package/bin/node.exe WINEPREFIX=$CACHE/win/prefix WINEDEBUG=-all
  export WINEDLLOVERRIDES="mscoree,mshtml=;winedbg.exe=d"
fi
stamp "test/package.test.ts, test/doc-examples.test.ts"
npx vitest run --project tier-independent test/package.test.ts test/doc-examples.test.ts --reporter=default --reporter=json --outputFile="$REPORT"
stamp "done"
