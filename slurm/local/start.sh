#!/usr/bin/env bash
# Bring up a real single-node Slurm cluster on this machine (root, no systemd, no cgroups):
# munged, a private mariadbd, slurmdbd, slurmctld, slurmd -- installing the packages if missing.
#
# Idempotent: with everything running (and the config unchanged) it only prints the summary;
# a dead daemon is restarted. Only pids recorded in $ANDREA_SLURM_STATE/run are ever signalled.
#
# Usage: slurm/local/start.sh [-q|--quiet] [--two-nodes]
#   --two-nodes  also (or only, if it is up) bring up the separate two-node cluster of twonode.sh
#                (two slurmd on this machine, for nodes=2 jobs); the single-node one is unchanged
# Exit codes: 0 ready, 2 usage, 3 not root (and something needs doing), 4 package install failed
# (no apt-get, apt-get update/install failed), 5 /etc/slurm/slurm.conf exists and is not ours
# (set ANDREA_SLURM_FORCE=1 to back it up and replace it), 6 a daemon failed to start,
# 7 the cluster did not become ready in time. See slurm/README.md.
set -euo pipefail
# shellcheck source=slurm/local/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

QUIET=0
for arg in "$@"; do
    case $arg in
        -q|--quiet) QUIET=1 ;;
        --two-nodes) exec "$(dirname "${BASH_SOURCE[0]}")/twonode.sh" start ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) die $E_USAGE "unknown argument: $arg (usage: start.sh [-q|--quiet] [--two-nodes])" ;;
    esac
done
T0=$(date +%s.%N)
info() { [ "$QUIET" = 1 ] || log "$@"; }

summary() {
    local el
    el=$(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    echo "andrea-slurm: cluster '$CLUSTER' ready: node $(hostname -s) ($(sinfo -h -N -o '%c CPUs, %m MB, %t' 2>/dev/null | head -n1)), partition $PARTITION; ${1}; state $STATE; ${el}s"
}

# ---- 0. what the configs should say (cheap: slurmd -C takes ~40 ms) -------------------------------
export PATH=$PATH:/usr/sbin:/sbin
HOST=$(hostname -s)
# nproc honours OMP_NUM_THREADS (the test suite sets it to 1): count the CPUs this machine gives us.
CPUS=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
mem_total_mb=$(awk '/^MemTotal:/{print int($2/1024)}' /proc/meminfo)
mem_mb=$(( mem_total_mb * 9 / 10 ))
slurmd_mem=""
command -v slurmd >/dev/null 2>&1 && slurmd_mem=$(slurmd -C 2>/dev/null | tr ' ' '\n' | sed -n 's/^RealMemory=//p' | head -n1 || true)
if [ -n "$slurmd_mem" ] && [ "$slurmd_mem" -lt "$mem_mb" ]; then mem_mb=$slurmd_mem; fi
DB_PASS=""
[ -r "$STATE/db.pass" ] && DB_PASS=$(cat "$STATE/db.pass")
render() {   # render TEMPLATE > stdout
    sed -e "s|@CLUSTER@|$CLUSTER|g" -e "s|@HOST@|$HOST|g" -e "s|@STATE@|$STATE|g" \
        -e "s|@CPUS@|$CPUS|g" -e "s|@MEM_MB@|$mem_mb|g" -e "s|@PARTITION@|$PARTITION|g" \
        -e "s|@CTLD_PORT@|$CTLD_PORT|g" -e "s|@SLURMD_PORT@|$SLURMD_PORT|g" \
        -e "s|@DBD_PORT@|$DBD_PORT|g" -e "s|@DB_PORT@|$DB_PORT|g" -e "s|@DB_PASS@|$DB_PASS|g" "$1"
}

# ---- 1. fast path: everything already running with the current config (works without root) -----
all_alive() { local d; for d in "${DAEMONS[@]}"; do is_alive "$d" || return 1; done; }
configs_current() {
    render "$TEMPLATES/slurm.conf.in" | cmp -s - "$SLURM_CONF_FILE" || return 1
    # slurmdbd.conf is root-only (it holds the db password): compare it when we can read it.
    if [ -r "$DBD_CONF_FILE" ] && [ -n "$DB_PASS" ]; then
        render "$TEMPLATES/slurmdbd.conf.in" | cmp -s - "$DBD_CONF_FILE" || return 1
    fi
}
if all_alive && configs_current && [ -z "${ANDREA_SLURM_FORCE:-}" ]; then
    st=$(node_state || true)
    case $st in
        idle|mix|mixed|alloc|allocated|comp|completing)
            summary "all daemons already running"; exit $E_OK ;;
    esac
fi

if [ "$(id -u)" != 0 ]; then
    # Name the way to become root that exists here: many containers have no sudo.
    if command -v sudo >/dev/null 2>&1; then how="run 'sudo $0'"; else how="run '$0' as root (no sudo here)"; fi
    die $E_NOT_ROOT "must run as root to install/start Slurm (cluster is not fully up: $how; status: $HERE/status.sh)"
fi

# One cluster per machine: munged's socket, the ports and /etc/slurm are shared. Refuse to take
# over the config of another state dir whose daemons are still running.
if [ -r "$SLURM_CONF_FILE" ] && grep -q "$MARKER" "$SLURM_CONF_FILE"; then
    other=$(sed -n 's|^StateSaveLocation=\(.*\)/slurmctld$|\1|p' "$SLURM_CONF_FILE" | head -n1)
    if [ -n "$other" ] && [ "$other" != "$STATE" ] &&
        ( RUN=$other/run; for d in "${DAEMONS[@]}"; do is_alive "$d" && exit 0; done; exit 1 ); then
        die $E_FOREIGN_CONF "another andrea-slurm cluster (state $other) is running; stop it first (ANDREA_SLURM_STATE=$other $HERE/stop.sh)"
    fi
fi

mkdir -p "$STATE" "$RUN" "$LOG"
chmod 755 "$STATE"
# One start.sh at a time (e.g. two pytest sessions). fd 9 is closed in every daemon we launch.
exec 9>"$STATE/start.lock"
flock -w 300 9 || die $E_TIMEOUT "another start.sh holds $STATE/start.lock"

# ---- 2. packages --------------------------------------------------------------------------------
PKGS=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server)
need_bins=(munged mariadbd mariadb-install-db mariadb-admin mariadb slurmdbd slurmctld slurmd sinfo sacctmgr sbatch sacct scontrol)
missing=()
for b in "${need_bins[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die $E_INSTALL "missing ${missing[*]} and no apt-get to install ${PKGS[*]}"
    info "installing ${PKGS[*]} (missing: ${missing[*]}) ..."
    t=$(date +%s)
    # The packages must not try to start services themselves (no init system here).
    policy_added=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy_added=1
    fi
    rc=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 update &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${PKGS[@]}"
    } >"$LOG/apt.log" 2>&1 || rc=$?
    [ "$policy_added" = 1 ] && rm -f /usr/sbin/policy-rc.d
    if [ "$rc" != 0 ]; then
        tail -n 20 "$LOG/apt.log" >&2
        die $E_INSTALL "apt-get failed (rc $rc) installing ${PKGS[*]}; full log: $LOG/apt.log"
    fi
    for b in "${need_bins[@]}"; do command -v "$b" >/dev/null 2>&1 || die $E_INSTALL "$b still missing after installing ${PKGS[*]}"; done
    info "packages installed in $(( $(date +%s) - t )) s"
fi

# ---- 3. configs ---------------------------------------------------------------------------------
if [ -z "$slurmd_mem" ]; then   # slurmd was only just installed
    slurmd_mem=$(slurmd -C 2>/dev/null | tr ' ' '\n' | sed -n 's/^RealMemory=//p' | head -n1 || true)
    if [ -n "$slurmd_mem" ] && [ "$slurmd_mem" -lt "$mem_mb" ]; then mem_mb=$slurmd_mem; fi
fi
if [ ! -s "$STATE/db.pass" ]; then
    (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$STATE/db.pass")
fi
DB_PASS=$(cat "$STATE/db.pass")
mkdir -p "$CONF_DIR"
for f in "$SLURM_CONF_FILE" "$DBD_CONF_FILE"; do
    if [ -e "$f" ] && ! grep -q "$MARKER" "$f"; then
        if [ -n "${ANDREA_SLURM_FORCE:-}" ]; then
            bak=$f.bak.$(date +%Y%m%d%H%M%S); cp -p "$f" "$bak"; log "backed up foreign $f to $bak"
        else
            die $E_FOREIGN_CONF "$f exists and was not written by this script; set ANDREA_SLURM_FORCE=1 to back it up and replace it"
        fi
    fi
done
render "$TEMPLATES/slurm.conf.in" >"$STATE/slurm.conf.rendered"
(umask 077; render "$TEMPLATES/slurmdbd.conf.in" >"$STATE/slurmdbd.conf.rendered")
slurm_changed=0; dbd_changed=0
cmp -s "$STATE/slurm.conf.rendered" "$SLURM_CONF_FILE" 2>/dev/null || slurm_changed=1
cmp -s "$STATE/slurmdbd.conf.rendered" "$DBD_CONF_FILE" 2>/dev/null || dbd_changed=1
install -m 644 -o root -g root "$STATE/slurm.conf.rendered" "$SLURM_CONF_FILE"
install -m 600 -o root -g root "$STATE/slurmdbd.conf.rendered" "$DBD_CONF_FILE"
# A changed config only takes effect on restart: restart the Slurm daemons we run.
if [ "$dbd_changed" = 1 ] && is_alive slurmdbd; then info "slurmdbd.conf changed: restarting slurmdbd"; stop_daemon slurmdbd; fi
if [ "$slurm_changed" = 1 ]; then
    for d in slurmd slurmctld; do
        if is_alive "$d"; then info "slurm.conf changed: restarting $d"; stop_daemon "$d"; fi
    done
fi

mkdir -p "$STATE/slurmctld" "$STATE/slurmd"

# ---- 4. daemons ---------------------------------------------------------------------------------
STARTED=()
# launch NAME USER CMD... : run CMD in the foreground of its own session as USER, record its pid.
launch() {
    local name=$1 user=$2; shift 2
    local out=$LOG/$name.out
    echo "==== $(date -u +%FT%TZ) start.sh launching: $*" >>"$out"
    if [ "$user" = root ]; then
        ( cd "$STATE" && exec setsid "$@" ) 9>&- </dev/null >>"$out" 2>&1 &
    else
        ( cd / && exec setsid setpriv --reuid="$user" --regid="$user" --init-groups "$@" ) 9>&- </dev/null >>"$out" 2>&1 &
    fi
    echo $! >"$RUN/$name.pid"
    STARTED+=("$name")
    # setsid/setpriv exec in place, so the pid is the daemon's once the execs are done.
    local i
    for ((i = 0; i < 50; i++)); do
        [ "$(cat "/proc/$!/comm" 2>/dev/null)" = "$name" ] && break
        sleep 0.02
    done
}
# fail NAME MESSAGE : print the daemon's log tails and exit 6
fail() {
    local name=$1; shift
    for f in "$LOG/$name.out" "$LOG/$name.log"; do
        [ -s "$f" ] && { echo "---- tail $f" >&2; tail -n 15 "$f" >&2; }
    done
    die $E_DAEMON "$name: $*"
}
# wait_for NAME SECONDS CMD... : poll CMD until it succeeds, the daemon dies, or time runs out.
wait_for() {
    local name=$1 secs=$2; shift 2
    local deadline=$(( $(date +%s) + secs ))
    until "$@" >/dev/null 2>&1; do
        is_alive "$name" || fail "$name" "exited during start-up"
        [ "$(date +%s)" -lt "$deadline" ] || fail "$name" "not ready after ${secs}s (waiting for: $*)"
        sleep 0.2
    done
}

# munged, as the munge user (the package creates the key; create one if it did not)
if ! is_alive munged; then
    if [ ! -s /etc/munge/munge.key ]; then
        info "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null 2>&1; then setpriv --reuid=munge --regid=munge --init-groups mungekey --create --keyfile=/etc/munge/munge.key
        else dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; fi
    fi
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 755 /run/munge; chmod 700 /var/lib/munge /var/log/munge
    launch munged munge munged -F     # -F logs to stderr: $LOG/munged.out
    wait_for munged 15 munge -n
fi

# private mariadbd: own datadir, 127.0.0.1:$DB_PORT, socket+pid in a dir mysql owns
db_sql() { mariadb --no-defaults -S "$MYSQL_SOCK" -u root -e "$1"; }
if ! is_alive mariadbd; then
    mkdir -p "$MYSQL_RUN" "$MYSQL_DATA"
    chown mysql:mysql "$MYSQL_RUN" "$MYSQL_DATA"; chmod 750 "$MYSQL_DATA"; chmod 755 "$MYSQL_RUN"
    if [ ! -d "$MYSQL_DATA/mysql" ]; then
        info "initialising private mariadb datadir $MYSQL_DATA"
        mariadb-install-db --no-defaults --user=mysql --datadir="$MYSQL_DATA" \
            --auth-root-authentication-method=socket --skip-test-db >>"$LOG/mariadbd.out" 2>&1 ||
            fail mariadbd "mariadb-install-db failed"
    fi
    launch mariadbd mysql mariadbd --no-defaults --datadir="$MYSQL_DATA" \
        --socket="$MYSQL_SOCK" --pid-file="$MYSQL_RUN/mariadbd.pid" \
        --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
        --log-error="$LOG/mariadbd.log" --innodb-buffer-pool-size=128M \
        --innodb-lock-wait-timeout=900 --max-allowed-packet=64M
    wait_for mariadbd "$READY_TIMEOUT" mariadb-admin --no-defaults -S "$MYSQL_SOCK" -u root ping
    db_sql "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
            CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
            ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
        fail mariadbd "could not create the slurm database user"
fi

# slurmdbd, then make sure the cluster is registered
if ! is_alive slurmdbd; then
    launch slurmdbd root slurmdbd -D
    wait_for slurmdbd "$READY_TIMEOUT" sacctmgr -n -P list cluster format=cluster
fi
if ! cluster_listed; then
    info "registering cluster '$CLUSTER' with slurmdbd"
    sacctmgr -i add cluster "$CLUSTER" >>"$LOG/sacctmgr.out" 2>&1 || fail slurmdbd "sacctmgr add cluster $CLUSTER failed (see $LOG/sacctmgr.out)"
fi

if ! is_alive slurmctld; then
    launch slurmctld root slurmctld -D -i
    wait_for slurmctld "$READY_TIMEOUT" scontrol ping
fi
if ! is_alive slurmd; then
    launch slurmd root slurmd -D
fi

# ---- 5. readiness: node idle (or running jobs), cluster in accounting -------------------------
deadline=$(( $(date +%s) + READY_TIMEOUT )); resumed=0; st=""
while :; do
    for d in "${DAEMONS[@]}"; do is_alive "$d" || fail "$d" "died while waiting for the node"; done
    st=$(node_state || true)
    case $st in idle|mix|mixed|alloc|allocated|comp|completing) break ;; esac
    # A node left DOWN/DRAIN from an earlier run: resume it once (ReturnToService=2 usually does).
    case $st in down*|drain*|drng*|fail*)
        if [ "$resumed" = 0 ]; then scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true; resumed=1; fi ;;
    esac
    [ "$(date +%s)" -lt "$deadline" ] || { tail -n 15 "$LOG/slurmd.log" "$LOG/slurmctld.log" >&2 2>/dev/null || true; die $E_TIMEOUT "node $HOST not idle after ${READY_TIMEOUT}s (state: '${st:-none}')"; }
    sleep 0.2
done
cluster_listed || die $E_TIMEOUT "cluster '$CLUSTER' not listed by sacctmgr"

if [ ${#STARTED[@]} -eq 0 ]; then summary "all daemons already running (config refreshed)"
else summary "started: ${STARTED[*]}"; fi
