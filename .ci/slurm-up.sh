#!/usr/bin/env bash
# Starts a real single-node Slurm on this machine, as root, without systemd, for CI and local
# tests of `ndvm-search slurm`. Tried on Debian 12 (slurm-wlm 22.05.8, munge 0.5.15).
#
# What this script owns, all under the folder DIR (nothing in /etc, /run or /var is touched,
# except that apt-get installs the packages when they are missing):
#   DIR/etc/slurm.conf, DIR/etc/cgroup.conf   generated from `slurmd -C` (memory at 95 %)
#   DIR/munge-etc/munge.key                   a private MUNGE key (root, 0600)
#   DIR/munge-run/munge.socket.2              the private munged's socket (AuthInfo=socket=...)
#   DIR/state, DIR/spool                      slurmctld state, slurmd spool
#   DIR/log/*.log, DIR/log/*.out              daemon logs and their stdout/stderr
#   DIR/log/jobcomp.txt                       one line per finished job (jobcomp/filetxt)
#   DIR/pids/{munged,slurmctld,slurmd}        the PIDs slurm-down.sh stops (and only those)
# Processes: munged --foreground, slurmctld -D, slurmd -D, each a background child of this
# script, so the recorded PID ($!) is the daemon itself. They keep running after it exits.
# Ports: 6817 (slurmctld) and 6818 (slurmd) on this host; the script refuses to start if either
# is already taken.
#
# Usage: slurm-up.sh [DIR]    DIR defaults to a fresh /tmp/ndvm-slurm.XXXXXX
# On success the last line on stdout is `export SLURM_CONF=DIR/etc/slurm.conf` (everything else
# goes to stderr), so `eval "$(.ci/slurm-up.sh DIR)"` works. Stop with `.ci/slurm-down.sh DIR`.
# Run again on a DIR whose daemons all still run, it only prints that line; on a DIR whose
# daemons are all gone it starts them afresh (slurmctld -c: no job survives).
# Any failure exits non-zero with the node's state and reason and the logs' tails.
# Needs no stdin and no terminal (CI=true, </dev/null).
set -euo pipefail

# The daemons and mungekey live in /usr/sbin, which a non-login or non-root PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac

readonly WAIT_S="${SLURM_UP_WAIT_S:-60}"   # bound of each readiness wait
readonly PACKAGES=(slurm-wlm munge)
readonly NEEDED=(munged mungekey munge unmunge slurmctld slurmd slurmstepd sbatch squeue sinfo scontrol scancel)
readonly CTLD_PORT=6817 SLURMD_PORT=6818
readonly DAEMONS=(munged slurmctld slurmd)

D=""
NODE=""
START_NS="$(date +%s%N)"

say() { printf 'slurm-up: %s\n' "$*" >&2; }
elapsed() { # seconds since START_NS, one decimal
    local now
    now="$(date +%s%N)"
    printf '%d.%d' $(((now - START_NS) / 1000000000)) $((((now - START_NS) / 100000000) % 10))
}
show_logs() {
    # *.log: the daemons' own logs; *.out: their stdout/stderr (a copy of the log in the
    # foreground, plus what they print before the log file opens, e.g. a bad slurm.conf).
    local f n
    for f in "$D"/log/*.log "$D"/log/*.out; do
        [ -s "$f" ] || continue
        n=40
        [ "${f%.out}" != "$f" ] && n=15
        printf '\n----- %s (last %d lines) -----\n' "$f" "$n" >&2
        tail -n "$n" "$f" >&2 || true
    done
}
show_node() {
    [ -n "$NODE" ] && [ -f "${SLURM_CONF:-}" ] || return 0
    printf '\n----- node %s: state and reason -----\n' "$NODE" >&2
    timeout 10 sinfo -h -N -n "$NODE" -o '%T %E' >&2 2>&1 || true
    timeout 10 scontrol show node "$NODE" >&2 2>&1 || true
}
die() {
    say "error: $*"
    if [ -n "$D" ] && [ -d "$D/log" ]; then
        show_node
        show_logs
        local n live=()
        for n in "${DAEMONS[@]}"; do
            if running "$n"; then live+=("$n"); fi
        done
        [ "${#live[@]}" -eq 0 ] ||
            say "still running: ${live[*]}; stop them with slurm-down.sh $D"
    fi
    exit 1
}

# ---------------------------------------------------------------------------------------------
# 1. Packages (Debian's slurm-wlm and munge).
# ---------------------------------------------------------------------------------------------
missing_tools() {
    local t out=()
    for t in "${NEEDED[@]}"; do
        command -v "$t" >/dev/null 2>&1 || out+=("$t")
    done
    [ "${#out[@]}" -eq 0 ] || printf '%s ' "${out[@]}"
}

install_packages() {
    local missing
    missing="$(missing_tools)"
    [ -z "$missing" ] && return 0
    say "missing: ${missing}; installing ${PACKAGES[*]}"
    [ "$(id -u)" = 0 ] || die "installing ${PACKAGES[*]} needs root (running as $(id -un))"
    command -v apt-get >/dev/null 2>&1 || die "no apt-get: install ${PACKAGES[*]} by hand"
    # Keep maintainer scripts from starting services (no systemd here; we start our own).
    local added_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        added_policy=1
    fi
    # Lock::Timeout: wait for another apt/dpkg (e.g. unattended upgrades) instead of failing.
    local rc=0 apt=(apt-get -q -o DPkg::Lock::Timeout=300)
    {
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" update &&
            DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${PACKAGES[@]}"
    } </dev/null >&2 || rc=$?
    [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || die "apt-get could not install ${PACKAGES[*]} (exit $rc)"
    missing="$(missing_tools)"
    [ -z "$missing" ] || die "still missing after installing ${PACKAGES[*]}: $missing"
}

# ---------------------------------------------------------------------------------------------
# 2. The folder, and what an earlier run left in it.
# ---------------------------------------------------------------------------------------------
# running NAME: DIR/pids/NAME names a live process whose comm is NAME.
running() {
    local pid
    pid="$(cat "$D/pids/$1" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

ctld_up() { [[ "$(timeout 10 scontrol ping 2>/dev/null)" == *'is UP'* ]]; }

make_dir() {
    umask 022
    D="${1:-$(mktemp -d /tmp/ndvm-slurm.XXXXXX)}"
    mkdir -p -- "$D" && D="$(cd -- "$D" && pwd -P)" || die "cannot use folder ${1:-}"
    case "$D" in
        *[[:space:]]*) die "DIR must not contain whitespace (slurm.conf cannot quote it): $D" ;;
    esac
    export SLURM_CONF="$D/etc/slurm.conf"
    if [ -d "$D/pids" ]; then
        local n live=()
        for n in "${DAEMONS[@]}"; do
            if running "$n"; then live+=("$n"); fi
        done
        if [ "${#live[@]}" -eq "${#DAEMONS[@]}" ] && ctld_up; then
            say "already running in $D (munged, slurmctld, slurmd); nothing to do"
            echo "export SLURM_CONF=$SLURM_CONF"
            exit 0
        fi
        [ "${#live[@]}" -eq 0 ] ||
            die "$D is half running (${live[*]}); stop it with slurm-down.sh $D, then retry"
        say "$D holds PID files of daemons that are gone; starting afresh"
        rm -f -- "$D"/pids/* "$D"/run/*.pid "$D/munge-run/munge.socket.2" "$D/munge-run/munge.socket.2.lock"
    fi
    # munged wants the socket's folder reachable by everyone, and every folder above the key
    # owned by root (or itself) and not group/world-writable unless sticky.
    chmod 0755 "$D"
    install -d -m 0755 "$D/etc" "$D/state" "$D/spool" "$D/run" "$D/pids" "$D/munge-run"
    install -d -m 0700 "$D/munge-etc" "$D/munge-lib" "$D/log"
    SOCK="$D/munge-run/munge.socket.2"
}

check_ports() {
    command -v ss >/dev/null 2>&1 || { say "warning: no ss; not checking ports"; return 0; }
    local p
    for p in "$CTLD_PORT" "$SLURMD_PORT"; do
        if ss -ltnH "sport = :$p" 2>/dev/null | grep -q .; then
            die "port $p is in use (another Slurm?); stop it first"
        fi
    done
}

# wait_until DESCRIPTION DAEMON COMMAND...: runs COMMAND every 0.2 s until it succeeds, at most
# WAIT_S s; fails at once if DAEMON (its recorded PID) has exited. COMMAND keeps itself quiet
# (a check that finds a hopeless state may print why and die).
wait_until() {
    local what="$1" daemon="$2" deadline=$((SECONDS + WAIT_S))
    shift 2
    until "$@"; do
        running "$daemon" || die "$what: $daemon (pid $(cat "$D/pids/$daemon")) exited"
        [ "$SECONDS" -lt "$deadline" ] || die "$what: not ready after ${WAIT_S}s"
        sleep 0.2
    done
    say "$what: ready at $(elapsed)s"
}

# ---------------------------------------------------------------------------------------------
# 3. MUNGE: a private root instance (root-owned key 0600 under a 0700 folder, socket folder 0755).
# ---------------------------------------------------------------------------------------------
munge_round_trip() { munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; }

start_munge() {
    if [ ! -f "$D/munge-etc/munge.key" ]; then
        mungekey --create --keyfile "$D/munge-etc/munge.key" ||
            die "mungekey could not create $D/munge-etc/munge.key"
    fi
    munged --foreground \
        --key-file "$D/munge-etc/munge.key" \
        --socket "$SOCK" \
        --pid-file "$D/munge-run/munged.pid" \
        --seed-file "$D/munge-lib/munged.seed" \
        --log-file "$D/log/munged.log" \
        </dev/null >"$D/log/munged.out" 2>&1 &
    echo $! >"$D/pids/munged"
    wait_until "munged (socket $SOCK)" munged munge_round_trip
}

# ---------------------------------------------------------------------------------------------
# 4. slurm.conf and cgroup.conf from this machine's hardware (slurmd -C).
# ---------------------------------------------------------------------------------------------
field() { sed -n "s/.*[[:space:]]$1=\([0-9][0-9]*\).*/\1/p" <<<" $HW"; }

write_config() {
    local host
    host="$(hostname -s)"
    getent hosts "$host" >/dev/null || say "warning: $host does not resolve; using 127.0.0.1 as its address"
    # No `| head`: under pipefail a SIGPIPE to slurmd would read as a failure.
    HW="$(slurmd -C)" || die "slurmd -C failed"
    HW="${HW%%$'\n'*}"
    say "hardware: $HW"
    local cpus boards sockets cores threads mem v
    cpus="$(field CPUs)" boards="$(field Boards)" sockets="$(field SocketsPerBoard)"
    cores="$(field CoresPerSocket)" threads="$(field ThreadsPerCore)" mem="$(field RealMemory)"
    for v in cpus boards sockets cores threads mem; do
        [ -n "${!v}" ] || die "cannot read $v from slurmd -C: $HW"
    done
    # Configured memory above the measured amount drains the node ("Low RealMemory").
    mem=$((mem * 95 / 100))
    cat >"$SLURM_CONF" <<EOF
# Generated by slurm-up.sh for a single-node CI Slurm (see .ci/slurm-up.sh).
ClusterName=ndvmci
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${SOCK}
SlurmctldPort=${CTLD_PORT}
SlurmdPort=${SLURMD_PORT}
StateSaveLocation=${D}/state
SlurmdSpoolDir=${D}/spool
SlurmctldPidFile=${D}/run/slurmctld.pid
SlurmdPidFile=${D}/run/slurmd.pid
SlurmctldLogFile=${D}/log/slurmctld.log
SlurmdLogFile=${D}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${D}/log/jobcomp.txt
SchedulerType=sched/backfill
# Schedule a submitted batch job at once (the default batch_sched_delay is 3 s).
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=10
MinJobAge=3600
InactiveLimit=0
SlurmdTimeout=120
SlurmctldTimeout=120
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} Boards=${boards} SocketsPerBoard=${sockets} CoresPerSocket=${cores} ThreadsPerCore=${threads} RealMemory=${mem} State=UNKNOWN
PartitionName=ci Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF
    # slurmd always loads a cgroup plugin in 22.05; v1's init touches nothing, and no configured
    # plugin (linuxproc, task/none, jobacct_gather/none) uses it. Found next to $SLURM_CONF.
    cat >"$D/etc/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
IgnoreSystemd=yes
EOF
    NODE="$host"
}

# ---------------------------------------------------------------------------------------------
# 5. slurmctld and slurmd in the foreground, in our background: $! is the daemon itself.
# ---------------------------------------------------------------------------------------------
node_idle() {
    local state
    state="$(timeout 10 sinfo -h -N -n "$NODE" -o %T 2>/dev/null)" || return 1
    state="${state%%$'\n'*}"
    case "$state" in
        idle) return 0 ;;
        drain* | inval* | down* | fail*)
            # Not transient: a config mismatch. Say why (die prints the node) and stop waiting.
            die "node $NODE is $state" ;;
        *) return 1 ;;
    esac
}

start_slurm() {
    slurmctld -D -c -f "$SLURM_CONF" </dev/null >"$D/log/slurmctld.out" 2>&1 &
    echo $! >"$D/pids/slurmctld"
    wait_until "slurmctld (scontrol ping)" slurmctld ctld_up

    slurmd -D -f "$SLURM_CONF" -N "$NODE" </dev/null >"$D/log/slurmd.out" 2>&1 &
    echo $! >"$D/pids/slurmd"
    wait_until "node $NODE idle" slurmd node_idle

    # The pid files Slurm wrote must name the same processes.
    local d
    for d in slurmctld slurmd; do
        [ "$(cat "$D/run/$d.pid" 2>/dev/null)" = "$(cat "$D/pids/$d")" ] ||
            say "warning: $D/run/$d.pid disagrees with the recorded PID $(cat "$D/pids/$d")"
    done
}

main() {
    install_packages
    make_dir "${1:-}"
    check_ports
    start_munge
    write_config
    start_slurm
    say "$(sinfo --version 2>/dev/null) up in $D at $(elapsed)s: node $NODE idle, partition ci;" \
        "pids $(cd "$D/pids" && for n in "${DAEMONS[@]}"; do printf '%s=%s ' "$n" "$(cat "$n")"; done)"
    say "stop with: .ci/slurm-down.sh $D"
    echo "export SLURM_CONF=$SLURM_CONF"
}

main "$@"
