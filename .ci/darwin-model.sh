#!/usr/bin/env bash
# The macOS code on a model of XNU's process table, run on Linux (called by
# .ci/run as a lane; `npm run test:darwin-model` runs it too):
#
#   .ci/darwin-model.sh [<report.json> [<vitest arguments>...]]
#
# Builds, in a copy of this checkout, what binding.gyp builds for macOS (the
# anchor and the addon, native/darwin/tree.cc unchanged) against the model
# (test/xnu-model: a shim in place of libproc, sysctl and kqueue, and a
# daemon fed by the kernel's process events that keeps what XNU keeps;
# docs/xnu-model.md), starts the model's kernel, and runs the process-group
# suite and the darwin model's own tests with the tests' ps observer
# (CORDON_TEST_OBSERVER=ps), the way the suite observes processes on macOS.
# CORDON_XNU_RELEASE picks the XNU whose rules the model follows: 15.4
# (default), 13 or 11; CORDON_XNU_MUTATE=<rule> turns one rule off (a check
# that the model's own tests see it: test/xnu-model/model.test.ts);
# CORDON_XNU_LOG=<file> has the kernel write every event and answer there,
# timed (with CORDON_TRACE=<file>, the anchors' side of a race). The Node
# that runs the tests is a third-party program to the model, as on a Mac,
# wherever it is installed. The model needs root (the proc connector). Events the
# model lost (its buffer full) fail the lane. Writes a vitest JSON report to
# <report.json> when given.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
REPORT=${1:-}
[[ $REPORT == - ]] && REPORT=
[[ -n $REPORT ]] && REPORT=$(realpath -m "$REPORT")
shift || true
VITEST_ARGS=("$@")
((${#VITEST_ARGS[@]})) || VITEST_ARGS=(--project process-group --project darwin-model)
RELEASE=${CORDON_XNU_RELEASE:-15.4}
T0=$(date +%s)
stamp() { echo "[darwin-model +$(($(date +%s) - T0))s] $*"; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cordon-darwin-model.XXXXXX")
KERNEL_PID=
finish() {
  local rc=$? stats
  if [[ -n $KERNEL_PID ]]; then
    kill -TERM "$KERNEL_PID" 2>/dev/null || true
    wait "$KERNEL_PID" 2>/dev/null || true
    if [[ -s $WORK/stats.json ]]; then
      stats=$(cat "$WORK/stats.json")
      echo "the model's kernel: $stats"
      if ! node -e 'process.exit(JSON.parse(process.argv[1]).lost === 0 ? 0 : 1)' "$stats"; then
        echo "darwin-model: the model lost process events: its answers were not XNU's table" >&2
        ((rc)) || rc=1
      fi
    else
      echo "darwin-model: the model's kernel left no counters" >&2
      ((rc)) || rc=1
    fi
  fi
  rm -rf "$WORK"
  if ((rc)) && [[ -n $REPORT && ! -s $REPORT ]]; then
    printf '%s\n' '{"passed":0,"failed":1,"skipped":0,"numPassedTests":0,"numFailedTests":1,"numPendingTests":0,"numTodoTests":0,"success":false,"testResults":[]}' >"$REPORT"
    echo "darwin-model: 0 passed, 1 failed (the lane could not run)"
  fi
  exit "$rc"
}
trap finish EXIT

((EUID == 0)) || { echo "darwin-model: the model's kernel listens to the proc connector, which needs root" >&2; exit 1; }
command -v ps >/dev/null || { echo "darwin-model: no ps on PATH (Debian: apt-get install procps)" >&2; exit 1; }
[[ -d node_modules ]] || { echo "darwin-model: run npm ci first" >&2; exit 1; }

# A copy of the checkout (what git tracks and what is new), so that the
# model's build sits where node-gyp-build looks (build/Release) without
# touching this checkout's.
mkdir "$WORK/src"
if git rev-parse --git-dir >/dev/null 2>&1; then
  git ls-files -z -co --exclude-standard | grep -zv '^node_modules\(/\|$\)' | tar --null -T - -cf - | tar -xf - -C "$WORK/src"
else
  # (Not a git checkout: scripts/mutants.mjs's scratch copy, a git archive.)
  tar --exclude=./node_modules --exclude=./build --exclude=./build-win -cf - . | tar -xf - -C "$WORK/src"
fi
ln -s "$ROOT/node_modules" "$WORK/src/node_modules"
(cd "$WORK/src" && "$ROOT/node_modules/.bin/tsc" -p tsconfig.json)
node test/xnu-model/build.mjs "$WORK/model" --socket "$WORK/kernel.sock"
mkdir -p "$WORK/src/build/Release"
cp "$WORK/model/cordon.node" "$WORK/model/cordon-anchor" "$WORK/src/build/Release/"

stamp "the model's kernel (XNU $RELEASE)"
"$WORK/model/xnu-kernel" "$WORK/kernel.sock" --release "$RELEASE" --third-party "$(command -v node)" ${CORDON_XNU_MUTATE:+--mutate "$CORDON_XNU_MUTATE"} ${CORDON_XNU_LOG:+--log "$CORDON_XNU_LOG"} --stats "$WORK/stats.json" >"$WORK/kernel.log" 2>&1 &
KERNEL_PID=$!
for _ in $(seq 1 100); do [[ -S $WORK/kernel.sock ]] && break; sleep 0.1; done
cat "$WORK/kernel.log"
[[ -S $WORK/kernel.sock ]] || { echo "darwin-model: the model's kernel did not start" >&2; exit 1; }

cd "$WORK/src"
node -e "console.log('  probe() =', JSON.stringify(require('node-gyp-build')('.').probe()))"
export CORDON_TEST_OBSERVER=ps CORDON_XNU_MODEL=$WORK/kernel.sock CORDON_XNU_RELEASE=$RELEASE
reporters=(--reporter=default)
[[ -n $REPORT ]] && reporters+=(--reporter=json --outputFile="$REPORT")
stamp "vitest: the process-group project and the darwin model's own tests"
rc=0
# One test file at a time: the model's kernel is one process that answers
# every anchor's calls (XNU answers each in the caller's own context), and
# two workers' anchors queue behind each other there, each call of one
# waiting out the other's: seen as anchors still busy seconds after their
# tree ended, a harness's limit, not the darwin code's.
npx vitest run --maxWorkers=1 "${VITEST_ARGS[@]}" "${reporters[@]}" || rc=$?
stamp "vitest exited $rc"
exit "$rc"
