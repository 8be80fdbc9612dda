#!/usr/bin/env bash
# Stop the daemons that slurm/local/start.sh started -- only the pids it recorded in
# $ANDREA_SLURM_STATE/run (default /var/lib/andrea-slurm/run), never anything found by name.
#
# Usage: slurm/local/stop.sh [--cancel-jobs] [--purge] | --two-nodes
#   --two-nodes    stop only the two-node cluster of twonode.sh (cancelling its jobs) and remove
#                  its /etc/hosts lines; the single-node cluster keeps running
#   --cancel-jobs  scancel all jobs first (otherwise running job steps outlive slurmd)
#   --purge        afterwards delete the state dir (database, spool, logs) and the
#                  /etc/slurm/{slurm,slurmdbd}.conf this script wrote; packages stay installed
# Exit codes: 0 stopped (or nothing to stop), 2 usage, 3 not root.
set -euo pipefail
# shellcheck source=slurm/local/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export PATH=$PATH:/usr/sbin:/sbin

CANCEL=0; PURGE=0
for arg in "$@"; do
    case $arg in
        --cancel-jobs) CANCEL=1 ;;
        --purge) PURGE=1 ;;
        --two-nodes) exec "$HERE/twonode.sh" stop ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) die $E_USAGE "unknown argument: $arg (usage: stop.sh [--cancel-jobs] [--purge])" ;;
    esac
done
[ "$(id -u)" = 0 ] || die $E_NOT_ROOT "must run as root"

if is_alive slurmctld; then
    jobs=$(squeue -h -o '%i' 2>/dev/null | wc -l || echo 0)
    if [ "$CANCEL" = 1 ] && [ "$jobs" -gt 0 ]; then
        log "cancelling $jobs job(s)"
        squeue -h -o '%u' 2>/dev/null | sort -u | while read -r u; do scancel --quiet --user="$u" || true; done
        for ((i = 0; i < 100; i++)); do   # up to 10 s (KillWait=5)
            [ "$(squeue -h -t running,completing 2>/dev/null | wc -l)" = 0 ] && break; sleep 0.1
        done
    elif [ "$jobs" -gt 0 ]; then
        log "note: $jobs job(s) still queued/running; their job steps are not stopped (use --cancel-jobs)"
    fi
fi

for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
    stop_daemon "${DAEMONS[$i]}"
done

if [ "$PURGE" = 1 ]; then
    for f in "$SLURM_CONF_FILE" "$DBD_CONF_FILE"; do
        if [ -e "$f" ] && grep -q "$MARKER" "$f"; then rm -f "$f"; log "removed $f"; fi
    done
    case $STATE in /|/var|/var/lib|/etc|/usr|"") die 1 "refusing to purge STATE=$STATE" ;; esac
    rm -rf "$STATE"; log "removed $STATE"
fi
echo "andrea-slurm: stopped"
