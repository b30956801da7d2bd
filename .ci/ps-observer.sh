#!/usr/bin/env bash
# The ps-observer lane, run on Linux (called by .ci/run as lane 6):
#
#   .ci/ps-observer.sh <report.json>
#
# Runs the process-group suite (the macOS strategy, and the tier-independent
# files) with the tests' ps observer (CORDON_TEST_OBSERVER=ps, see
# test/helpers/observer.ts): every question the tests ask about another
# process (stat, command line, tags in the environment, signal dispositions)
# is answered by `ps` with environments, the way the suite observes processes
# on macOS, where there is no /proc. This proves the ps path of the helpers
# here; the macOS ps (BSD, `-E`) itself is not run by this lane. setsid is
# the suite's own too (CORDON_TEST_SETSID_SHIM=1: test/helpers/setsid-shim.ts),
# as on macOS, where util-linux is missing. Writes a vitest JSON report to
# <report.json>.
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:?usage: .ci/ps-observer.sh <report.json>}
REPORT=$(realpath -m "$REPORT")
command -v ps >/dev/null || { echo "ps-observer: no ps on PATH (Debian: apt-get install procps)" >&2; exit 1; }
echo "ps-observer: $(ps --version 2>/dev/null || echo 'ps (version unknown)')"
export CORDON_TEST_OBSERVER=ps
export CORDON_TEST_SETSID_SHIM=1
exec npx vitest run --project process-group --project tier-independent \
  --reporter=default --reporter=json --outputFile="$REPORT"
