#!/usr/bin/env bash
# Node's own child_process tests against cordon/child_process (issue #48; a
# lane of .ci/run): Node 18.20's test/parallel/test-child-process-* files,
# fetched from Debian's source package of nodejs into the CI cache on the
# first run (scripts/node-tests/source.mjs: pinned by version and SHA-256;
# where it cannot be had, the lane fails saying so), each run with this
# node as written and with `child_process` swapped for cordon's
# (test/node-tests/node-tests.test.ts; docs/node-tests.md has the table).
#
#   .ci/node-tests.sh [<report.json>]
set -euo pipefail
exec </dev/null
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPORT=${1:-}
ARGS=(--project node-tests --reporter=default)
[[ -n $REPORT ]] && ARGS+=(--reporter=json "--outputFile=$REPORT")
CORDON_NODE_TESTS=1 npx vitest run "${ARGS[@]}"
