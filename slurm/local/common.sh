# Shared settings and helpers for slurm/local/{start,stop,status}.sh. Sourced, not run.
# shellcheck shell=bash

# ---- settings (environment overrides) --------------------------------------------------------
STATE=${ANDREA_SLURM_STATE:-/var/lib/andrea-slurm}
CLUSTER=${ANDREA_SLURM_CLUSTER:-andrea}
PARTITION=${ANDREA_SLURM_PARTITION:-debug}
DB_PORT=${ANDREA_SLURM_DB_PORT:-3399}          # private mariadbd, 127.0.0.1 only
CTLD_PORT=${ANDREA_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${ANDREA_SLURM_SLURMD_PORT:-6818}
DBD_PORT=${ANDREA_SLURM_DBD_PORT:-6819}
READY_TIMEOUT=${ANDREA_SLURM_TIMEOUT:-90}      # seconds to wait for each readiness step
# The daemons outlive whoever starts them, so they must not inherit a caller's private temp
# folder (the test suite's, mode 700 and removed when it ends: mariadbd, as user mysql, failed
# to start with it).
export TMPDIR=${ANDREA_SLURM_TMPDIR:-/tmp}
# Slurm's client commands (sbatch, sacct, ... as run by submitit) read this path by default,
# so the config has to live here rather than in the state dir.
CONF_DIR=/etc/slurm
SLURM_CONF_FILE=$CONF_DIR/slurm.conf
DBD_CONF_FILE=$CONF_DIR/slurmdbd.conf
MARKER="Managed by andrea slurm/local/start.sh"

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEMPLATES=$HERE/templates
RUN=$STATE/run              # our pid files: <daemon>.pid (the pid we started)
LOG=$STATE/log              # daemon logs: <daemon>.log (the daemon's own) and <daemon>.out (stdio)
MYSQL_RUN=$STATE/mysqld     # socket + mariadbd's own pid file, owned by mysql
MYSQL_DATA=$STATE/mysql
MYSQL_SOCK=$MYSQL_RUN/mysqld.sock

# Start order; stop goes in reverse.
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)

# ---- exit codes (documented in slurm/README.md) ----------------------------------------------
E_OK=0
E_USAGE=2
E_NOT_ROOT=3
E_INSTALL=4
E_FOREIGN_CONF=5
E_DAEMON=6
E_TIMEOUT=7

log()  { printf 'andrea-slurm: %s\n' "$*" >&2; }
die()  { local code=$1; shift; printf 'andrea-slurm: ERROR: %s\n' "$*" >&2; exit "$code"; }

# pid_of NAME -> prints the recorded pid (empty if none)
pid_of() { [ -r "$RUN/$1.pid" ] && tr -dc '0-9' <"$RUN/$1.pid"; }

# is_alive NAME -> 0 if the pid we recorded is still that daemon (guards against pid reuse
# and zombies).
is_alive() {
    local name=$1 pid comm st
    pid=$(pid_of "$name") || return 1
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$name" ] || return 1
    st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" != Z ] && [ "$st" != X ]
}

# stop_daemon NAME -> TERM the recorded pid (only if it is still that daemon), wait, then KILL.
stop_daemon() {
    local name=$1 pid i
    if ! is_alive "$name"; then
        rm -f "$RUN/$name.pid"
        return 0
    fi
    pid=$(pid_of "$name")
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do        # up to 15 s (mariadbd flushes on shutdown)
        is_alive "$name" || break
        sleep 0.1
    done
    if is_alive "$name"; then
        log "$name (pid $pid) did not stop on TERM within 15 s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    rm -f "$RUN/$name.pid"
    log "stopped $name (pid $pid)"
}

node_state() { sinfo -h -N -n "$(hostname -s)" -o '%t' 2>/dev/null | head -n1; }
cluster_listed() { sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; }
