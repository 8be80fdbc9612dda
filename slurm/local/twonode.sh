#!/usr/bin/env bash
# A second, two-node Slurm cluster on this one machine, for multi-node (nodes=2) jobs: its own
# slurmctld and two slurmd (`slurmd -N andrea-n1`, `-N andrea-n2`, distinct ports and spool dirs),
# sharing munged and slurmdbd with the single-node cluster of start.sh, which it never changes
# (its config is $STATE/twonode/slurm.conf, not /etc/slurm/slurm.conf). Called by
# `start.sh --two-nodes`, `stop.sh --two-nodes` and `status.sh --two-nodes`.
#
# Use it with SLURM_CONF=$STATE/twonode/slurm.conf in the environment of sbatch/sacct/the sweep
# (`start` prints that line last). Node names resolve through two /etc/hosts lines (127.0.0.1)
# that `start` adds and `stop` removes; nothing else outside $STATE/twonode is written.
#
# Usage: slurm/local/twonode.sh start|stop|status
# Exit codes as start.sh's (0 ok, 1 status: down, 2 usage, 3 not root, 6 daemon failed, 7 timeout).
set -euo pipefail
# shellcheck source=slurm/local/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export PATH=$PATH:/usr/sbin:/sbin

STATE2=$STATE/twonode
CLUSTER2=${CLUSTER}2n
CTLD2_PORT=${ANDREA_SLURM_2N_CTLD_PORT:-6827}
N1_PORT=${ANDREA_SLURM_2N_PORT1:-6828}
N2_PORT=${ANDREA_SLURM_2N_PORT2:-6829}
NODE1=andrea-n1
NODE2=andrea-n2
CONF2=$STATE2/slurm.conf
HOSTS_MARK="# andrea-slurm two-node cluster (slurm/local/twonode.sh)"
RUN=$STATE2/run      # is_alive/stop_daemon read pid files here
LOG=$STATE2/log
export SLURM_CONF=$CONF2
DAEMONS2=(slurmctld slurmd-n1 slurmd-n2)
comm_of() { case $1 in slurmd-*) echo slurmd ;; *) echo "$1" ;; esac; }

alive() {  # alive NAME: the recorded pid is still that daemon (by its command name)
    local pid comm st
    pid=$(pid_of "$1") || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$(comm_of "$1")" ] || return 1
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" != Z ] && [ "$st" != X ]
}
stop_one() {
    local name=$1 pid i
    if ! alive "$name"; then rm -f "$RUN/$name.pid"; return 0; fi
    pid=$(pid_of "$name"); kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do alive "$name" || break; sleep 0.1; done
    alive "$name" && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$RUN/$name.pid"; log "stopped $name (pid $pid)"
}
nodes_ready() {  # both nodes idle (or busy) in this cluster's sinfo
    local n=0 st
    for st in $(sinfo -h -N -o '%t' 2>/dev/null); do
        case $st in idle|mix|mixed|alloc|allocated|comp|completing) n=$((n + 1)) ;; esac
    done
    [ "$n" = 2 ]
}

start() {
    [ "$(id -u)" = 0 ] || die $E_NOT_ROOT "must run as root"
    # munged and slurmdbd come from the single-node cluster (idempotent, a no-op when up).
    env -u SLURM_CONF "$HERE/start.sh" -q >/dev/null || die $E_DAEMON "the single-node cluster (start.sh) is not up"
    mkdir -p "$STATE2/slurmctld" "$RUN" "$LOG"
    local mem_mb cpus
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # not OMP_NUM_THREADS (tests set it)
    mem_mb=$(( $(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo) * 4 / 10 ))  # each node
    sed -e "s|@CLUSTER2@|$CLUSTER2|g" -e "s|@HOST@|$(hostname -s)|g" -e "s|@STATE2@|$STATE2|g" \
        -e "s|@CTLD2_PORT@|$CTLD2_PORT|g" -e "s|@DBD_PORT@|$DBD_PORT|g" -e "s|@CPUS@|$cpus|g" \
        -e "s|@MEM2_MB@|$mem_mb|g" -e "s|@PARTITION@|$PARTITION|g" -e "s|@NODE1@|$NODE1|g" \
        -e "s|@NODE2@|$NODE2|g" -e "s|@N1_PORT@|$N1_PORT|g" -e "s|@N2_PORT@|$N2_PORT|g" \
        "$TEMPLATES/slurm-twonode.conf.in" >"$CONF2.new"
    if ! cmp -s "$CONF2.new" "$CONF2" 2>/dev/null; then
        mv "$CONF2.new" "$CONF2"
        for d in "${DAEMONS2[@]}"; do stop_one "$d"; done   # a new config needs a restart
    else rm -f "$CONF2.new"; fi
    if ! grep -qF "$HOSTS_MARK" /etc/hosts; then
        printf '127.0.0.1 %s %s %s\n' "$NODE1" "$NODE2" "$HOSTS_MARK" >>/etc/hosts
    fi
    if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER2"; then
        sacctmgr -i add cluster "$CLUSTER2" >>"$LOG/sacctmgr.out" 2>&1 || die $E_DAEMON "sacctmgr add cluster $CLUSTER2 failed"
    fi
    local started=()
    launch2() {  # launch2 NAME CMD...
        local name=$1; shift
        ( cd "$STATE2" && exec setsid "$@" ) 9>&- </dev/null >>"$LOG/$name.out" 2>&1 &
        echo $! >"$RUN/$name.pid"; started+=("$name")
        local i; for ((i = 0; i < 50; i++)); do alive "$name" && break; sleep 0.02; done
    }
    alive slurmctld || launch2 slurmctld slurmctld -D -i -f "$CONF2"
    local deadline=$(( $(date +%s) + READY_TIMEOUT ))
    until scontrol ping >/dev/null 2>&1; do
        alive slurmctld || { tail -n 15 "$LOG/slurmctld.log" "$LOG/slurmctld.out" >&2 2>/dev/null; die $E_DAEMON "slurmctld ($CLUSTER2) exited during start-up"; }
        [ "$(date +%s)" -lt "$deadline" ] || die $E_TIMEOUT "slurmctld ($CLUSTER2) not answering after ${READY_TIMEOUT}s"
        sleep 0.2
    done
    alive slurmd-n1 || launch2 slurmd-n1 slurmd -D -N "$NODE1" -f "$CONF2"
    alive slurmd-n2 || launch2 slurmd-n2 slurmd -D -N "$NODE2" -f "$CONF2"
    local resumed=0
    until nodes_ready; do
        for d in "${DAEMONS2[@]}"; do alive "$d" || { tail -n 15 "$LOG/$d.out" >&2 2>/dev/null; die $E_DAEMON "$d died during start-up"; }; done
        if [ "$resumed" = 0 ] && sinfo -h -N -o '%t' 2>/dev/null | grep -Eq '^(down|drain|drng|fail)'; then
            scontrol update nodename="$NODE1,$NODE2" state=resume >/dev/null 2>&1 || true; resumed=1
        fi
        [ "$(date +%s)" -lt "$deadline" ] || { sinfo -N >&2; die $E_TIMEOUT "nodes $NODE1,$NODE2 not idle after ${READY_TIMEOUT}s"; }
        sleep 0.2
    done
    echo "andrea-slurm: two-node cluster '$CLUSTER2' ready: nodes $NODE1,$NODE2 (ports $N1_PORT,$N2_PORT), partition $PARTITION; started: ${started[*]:-nothing}"
    echo "SLURM_CONF=$CONF2"
}

stop() {
    [ "$(id -u)" = 0 ] || die $E_NOT_ROOT "must run as root"
    if alive slurmctld; then
        squeue -h -o '%i' 2>/dev/null | while read -r j; do scancel "$j" 2>/dev/null || true; done
    fi
    for ((i = ${#DAEMONS2[@]} - 1; i >= 0; i--)); do stop_one "${DAEMONS2[$i]}"; done
    if grep -qF "$HOSTS_MARK" /etc/hosts; then
        # /etc/hosts may be a bind mount: rewrite it in place rather than replace the file
        grep -vF "$HOSTS_MARK" /etc/hosts >"$STATE2/hosts.tmp" && cat "$STATE2/hosts.tmp" >/etc/hosts && rm -f "$STATE2/hosts.tmp"
    fi
    echo "andrea-slurm: two-node cluster stopped (the single-node cluster is untouched)"
}

status() {
    local ok=0 d
    for d in "${DAEMONS2[@]}"; do
        if alive "$d"; then printf '%-10s running  pid %s\n' "$d" "$(pid_of "$d")"; else printf '%-10s stopped\n' "$d"; ok=1; fi
    done
    if [ -r "$CONF2" ]; then sinfo -N 2>/dev/null || true; nodes_ready || ok=1; else ok=1; fi
    return $ok
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    -h|--help) sed -n '2,14p' "$0" ;;
    *) die $E_USAGE "usage: twonode.sh start|stop|status" ;;
esac
