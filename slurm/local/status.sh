#!/usr/bin/env bash
# Report each daemon started by slurm/local/start.sh (from its recorded pid), the node state
# and whether the cluster is registered in accounting. Works without root.
#
# Usage: slurm/local/status.sh [-q]     (-q: no output, exit code only)
#        slurm/local/status.sh --two-nodes (the two-node cluster of twonode.sh instead)
# Exit codes: 0 all daemons up and node usable, 1 something is down, 2 usage.
set -uo pipefail
# shellcheck source=slurm/local/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export PATH=$PATH:/usr/sbin:/sbin
QUIET=0
case ${1:-} in -q) QUIET=1 ;; "") ;; --two-nodes) exec "$HERE/twonode.sh" status ;; -h|--help) sed -n '2,7p' "$0"; exit 0 ;; *) die $E_USAGE "usage: status.sh [-q]" ;; esac
say() { [ "$QUIET" = 1 ] || printf '%s\n' "$*"; }

ok=0
for d in "${DAEMONS[@]}"; do
    pid=$(pid_of "$d" || true)
    if is_alive "$d"; then say "$(printf '%-10s running  pid %s' "$d" "$pid")"
    elif [ -n "$pid" ]; then say "$(printf '%-10s DEAD     (recorded pid %s)  log: %s/%s.out' "$d" "$pid" "$LOG" "$d")"; ok=1
    else say "$(printf '%-10s stopped' "$d")"; ok=1
    fi
done
if command -v sinfo >/dev/null 2>&1 && [ -r "$SLURM_CONF_FILE" ]; then
    st=$(node_state || true)
    say "$(printf '%-10s %s' node "$(hostname -s): ${st:-unreachable}")"
    case $st in idle|mix|mixed|alloc|allocated|comp|completing) ;; *) ok=1 ;; esac
    if cluster_listed; then say "$(printf '%-10s %s' accounting "cluster '$CLUSTER' registered")"
    else say "$(printf '%-10s %s' accounting "cluster '$CLUSTER' NOT listed by sacctmgr")"; ok=1; fi
    jobs=$(squeue -h 2>/dev/null | wc -l)
    say "$(printf '%-10s %s' jobs "$jobs in queue")"
else
    say "slurm not installed/configured"; ok=1
fi
say "state dir: $STATE"
exit $ok
