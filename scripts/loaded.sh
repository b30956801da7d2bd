#!/usr/bin/env bash
# Runs a command (default: npm test) while the machine is loaded the way a
# busy developer box or CI host is: N busy loops (default 2, one per core
# here) and M idle unrelated processes (default 2000), so that every /proc
# walk, every scheduling delay and every bound of the suite is tested under
# contention. The load is started by this script and ended by pid when the
# command ends (or this script is interrupted); nothing else is signalled.
#
#   scripts/loaded.sh [--busy N] [--idle M] [-- command args...]
set -uo pipefail
BUSY=2 IDLE=2000
while (($#)); do
  case $1 in
    --busy) BUSY=$2; shift 2 ;;
    --idle) IDLE=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
(($#)) || set -- npm test
PIDS=()
cleanup() {
  ((${#PIDS[@]})) && kill -KILL "${PIDS[@]}" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < BUSY; i++)); do
  (exec sh -c 'while :; do :; done') &
  PIDS+=($!)
done
for ((i = 0; i < IDLE; i++)); do
  sleep 100000 &
  PIDS+=($!)
done
echo "loaded.sh: $BUSY busy loops, $IDLE idle processes; $(ls -d /proc/[0-9]* | wc -l) processes on the machine" >&2
"$@"
rc=$?
echo "loaded.sh: '$*' exited $rc under load" >&2
exit $rc
