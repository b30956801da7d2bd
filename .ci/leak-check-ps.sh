#!/usr/bin/env bash
# The leak check where there is no /proc (the macOS job of
# .github/workflows/ci.yml; .ci/leak-sweep.py walks /proc, Linux only):
#
#   .ci/leak-check-ps.sh [VAR]
#
# Lists every live process whose environment, as ps shows it (BSD `ps -E`,
# procps `e`), carries CORDON_TEST_TAG (or VAR), and the processes above each
# (parent, grandparent, ... up to pid 1, never this script's own ancestry)
# whose environment ps does not show: on macOS ps -E is withheld the
# environment of a platform binary (Apple's sh, sleep, perl), so a leaked
# /bin/sh is known by lineage, as the parent of a tagged process. The suite
# runs its own sleep (test/helpers/setsid-shim.ts) so that the leaf of a
# leaked tree is readable. SIGKILLs each by pid, and exits 1 when it found any.
# Weaker than leak-sweep.py: one look, no stop first (a pid hopper can dodge
# it), and a platform binary with no tagged process below it (a lone leaked
# `sh -c 'while :; do :; done'`) is not seen (docs/macos-suite.md). Runs on
# Linux too (procps), which is how it was tried.
set -uo pipefail
VAR=${1:-CORDON_TEST_TAG}
if [[ $(uname -s) == Darwin ]]; then env_flag=-E; else env_flag=e; fi
me=$$
dir=$(mktemp -d "${TMPDIR:-/tmp}/cordon-leak-check.XXXXXX") || exit 2
trap 'rm -rf "$dir"' EXIT
# Two looks, without and with the environment: a process whose two lines are
# the same shows no environment. (lstart in both: a pid reused between them
# is another process.)
LC_ALL=C TZ=UTC ps -A -ww -o pid=,ppid=,lstart=,args= >"$dir/bare"
LC_ALL=C TZ=UTC ps -A -ww -o pid=,ppid=,lstart=,args= $env_flag >"$dir/env"
found=$(awk -v var="$VAR" -v me="$me" '
  FNR == NR { bare[$1] = $0; ppid[$1] = $2; next }
  { withenv[$1] = $0
    for (i = 8; i <= NF; i++) if (index($i, var "=") == 1) { tagged[$1] = 1; break } }
  END {
    # This script and its ancestors are never leftovers.
    for (p = me; p > 1 && !(p in ours); p = ppid[p]) ours[p] = 1
    for (p in tagged) if (!(p in ours) && ppid[p] != me) { out[p] = 1 }
    for (p in tagged) {
      if (p in ours) continue
      for (q = ppid[p]; q > 1 && !(q in ours) && !(q in out); q = ppid[q]) {
        if (!(q in bare) || !(q in withenv) || bare[q] != withenv[q]) break
        out[q] = 1
      }
    }
    for (p in out) print p, ppid[p], (p in tagged ? "tagged" : "hidden-parent")
  }' "$dir/bare" "$dir/env")
if [[ -z $found ]]; then
  echo "no process tagged $VAR is left"
  exit 0
fi
n=$(printf '%s\n' "$found" | wc -l | tr -d ' ')
echo "$n process(es) tagged $VAR (or above one, environment unseen) left behind (now SIGKILLed):"
printf '%s\n' "$found" | while read -r pid ppid how; do
  # Its arguments without its environment (not printed into the log).
  echo "  pid $pid ppid $ppid ($how): $(ps -ww -o args= -p "$pid" 2>/dev/null | cut -c1-200)"
  kill -KILL "$pid" 2>/dev/null
done
exit 1
