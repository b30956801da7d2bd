#!/usr/bin/env bash
# The leak check where there is no /proc (the macOS job of
# .github/workflows/ci.yml; .ci/leak-sweep.py walks /proc, Linux only):
#
#   .ci/leak-check-ps.sh [VAR]
#
# Lists every live process whose environment, as ps shows it (BSD `ps -E`,
# procps `e`), carries CORDON_TEST_TAG (or VAR), SIGKILLs each by pid, and
# exits 1 when it found any. Weaker than leak-sweep.py: one look, no stop
# first (a pid hopper can dodge it), and on macOS ps is not shown a platform
# binary's environment (Apple's sh, sleep, perl), so such a leftover is not
# seen at all. Runs on Linux too (procps), which is how it was tried.
set -uo pipefail
VAR=${1:-CORDON_TEST_TAG}
if [[ $(uname -s) == Darwin ]]; then env_flag=-E; else env_flag=e; fi
me=$$
found=$(LC_ALL=C ps -A -ww -o pid=,ppid=,args= $env_flag | awk -v var="$VAR" -v me="$me" '
  { for (i = 3; i <= NF; i++) if (index($i, var "=") == 1) { if ($1 != me && $2 != me) print; break } }')
if [[ -z $found ]]; then
  echo "no process tagged $VAR is left"
  exit 0
fi
n=$(printf '%s\n' "$found" | wc -l | tr -d ' ')
echo "$n process(es) tagged $VAR left behind (now SIGKILLed):"
printf '%s\n' "$found" | while read -r pid _; do
  # Its arguments without its environment (not printed into the log).
  echo "  pid $pid: $(ps -ww -o args= -p "$pid" 2>/dev/null | cut -c1-200)"
  kill -KILL "$pid" 2>/dev/null
done
exit 1
