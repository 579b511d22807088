#!/usr/bin/env bash
# Stops the single-node Slurm that .ci/slurm-up.sh DIR started.
#
# What this script owns: only the processes whose PIDs slurm-up.sh recorded in DIR/pids/
# (munged, slurmctld, slurmd), and the jobs of the Slurm configured by DIR/etc/slurm.conf.
# It never kills by name, and never touches a process whose /proc/PID/comm is not the daemon
# recorded (a recycled PID). Steps:
#   1. if slurmctld answers: scancel every job, then wait (bounded) until squeue shows none
#      (so no slurmstepd outlives its slurmd),
#   2. slurmd, then slurmctld, then munged: SIGTERM, up to STOP_WAIT_S s, then SIGKILL,
#   3. reports (does not kill) any slurmstepd left over, and where the logs are.
# Safe to call twice, and on a half-started DIR (missing PID files are skipped). DIR, its logs
# and the job completion file (DIR/log/jobcomp.txt) are kept unless --clean is given.
# Needs no stdin and no terminal (CI=true, </dev/null).
#
# Usage: slurm-down.sh DIR [--clean]   --clean removes DIR afterwards (only if all stopped)
# Exit status: 0 when everything stopped cleanly, 1 when something needed SIGKILL, jobs did not
# leave the queue in time, or a slurmstepd is left.
set -euo pipefail

readonly STOP_WAIT_S="${SLURM_DOWN_WAIT_S:-15}"
readonly QUEUE_WAIT_S="${SLURM_DOWN_QUEUE_WAIT_S:-30}"

START_NS="$(date +%s%N)"
say() { # prefixed with the seconds since the start, one decimal
    local ds=$((($(date +%s%N) - START_NS) / 100000000))
    printf 'slurm-down: [%d.%ds] %s\n' $((ds / 10)) $((ds % 10)) "$*" >&2
}

D="${1:?usage: slurm-down.sh DIR [--clean]}"
CLEAN="${2:-}"
[ -d "$D/pids" ] || { say "$D/pids does not exist: nothing was started there"; exit 0; }
D="$(cd -- "$D" && pwd -P)"
export SLURM_CONF="$D/etc/slurm.conf"
failed=0
stopped=()

# running NAME: DIR/pids/NAME names a live process whose comm is NAME.
running() {
    local pid
    pid="$(cat "$D/pids/$1" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

# 1. Jobs first, so that no slurmstepd outlives its slurmd.
cancel_jobs() {
    [ -f "$SLURM_CONF" ] || return 0
    if ! running slurmctld || [[ "$(timeout 10 scontrol ping 2>/dev/null)" != *'is UP'* ]]; then
        say "slurmctld does not answer; not cancelling jobs"
        return 0
    fi
    local jobs left deadline=$((SECONDS + QUEUE_WAIT_S))
    # squeue without -t lists the active jobs only (pending, running, completing, ...).
    jobs="$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')" || jobs=""
    if [ -n "${jobs// /}" ]; then
        say "cancelling jobs: $jobs"
        # shellcheck disable=SC2086 # one word per job id
        timeout 10 scancel $jobs || say "warning: scancel failed"
    fi
    while :; do
        left="$(timeout 10 squeue -h -o '%i %T' 2>/dev/null)" || { say "warning: squeue failed"; break; }
        [ -z "$left" ] && { say "queue empty"; return 0; }
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "warning: jobs still queued after ${QUEUE_WAIT_S}s: $(echo "$left" | tr '\n' ' ')"
            failed=1
            return 0
        fi
        sleep 0.5
    done
}

# stop NAME: the PID in DIR/pids/NAME, if it is still that program.
stop() {
    local name="$1" file="$D/pids/$1" pid comm deadline
    [ -f "$file" ] || return 0
    pid="$(cat "$file")"
    if ! kill -0 "$pid" 2>/dev/null; then
        say "$name (pid $pid) already gone"
        rm -f "$file"
        return 0
    fi
    # A recycled PID belongs to someone else: leave it alone.
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    if [ "$comm" != "$name" ]; then
        say "warning: pid $pid is now '$comm', not $name; not signalling it"
        rm -f "$file"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_WAIT_S))
    while kill -0 "$pid" 2>/dev/null; do
        # A zombie (exited, not yet reaped by its parent) has stopped.
        [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" = Z ] && break
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "warning: $name (pid $pid) ignored SIGTERM for ${STOP_WAIT_S}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            failed=1
            break
        fi
        sleep 0.2
    done
    say "$name (pid $pid) stopped"
    stopped+=("$pid")
    rm -f "$file"
}

# An exited daemon stays a zombie until its parent (init, once slurm-up.sh has exited) reaps it;
# wait a little for that so that `pgrep` shows nothing afterwards. Cosmetic only: no signal.
await_reaping() {
    local pid deadline=$((SECONDS + 5))
    for pid in ${stopped[@]+"${stopped[@]}"}; do
        while [ -d "/proc/$pid" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
        [ -d "/proc/$pid" ] && say "pid $pid has exited but is not yet reaped by its parent"
    done
    return 0
}

leftover_stepds() {
    local p pid comm out=()
    for p in /proc/[0-9]*; do
        pid="${p#/proc/}"
        comm="$(cat "$p/comm" 2>/dev/null || true)"
        [ "$comm" = slurmstepd ] && out+=("$pid")
    done
    if [ "${#out[@]}" -gt 0 ]; then
        say "warning: slurmstepd still running (not killed here): ${out[*]}"
        failed=1
    else
        say "no slurmstepd left"
    fi
}

cancel_jobs
stop slurmd
stop slurmctld
stop munged
await_reaping
leftover_stepds
say "logs kept in $D/log"
if [ "$CLEAN" = --clean ]; then
    if [ "$failed" = 0 ] && grep -q "^# Generated by slurm-up.sh" "$SLURM_CONF" 2>/dev/null; then
        rm -rf -- "$D"
        say "removed $D"
    else
        say "not removing $D: something did not stop cleanly, or it is not a slurm-up.sh folder"
    fi
fi
exit "$failed"
