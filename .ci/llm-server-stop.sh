#!/usr/bin/env bash
# .ci/llm-server-stop.sh: stops the model server of the live llm tests (issue 40).
#
# What it owns: the process recorded in target/llm-server/pid by .ci/llm-server.sh, and that
# record (pid, url). It never touches the venv (target/llm-venv) or the logs.
#
# Stops the model server that .ci/llm-server.sh started, by the PID it recorded in
# $NDVM_LLM_STATE/pid (default target/llm-server/pid): SIGTERM, up to 10 s for uvicorn to shut
# down, then SIGKILL, up to 5 s more. It never looks processes up by name, and it refuses to signal
# a PID whose command line is not llama_cpp.server (the PID may have been reused).
#
# Usage:  bash .ci/llm-server-stop.sh [--if-started]
#   --if-started   no recorded server is not an error (for an EXIT trap that also runs when the
#                  start failed, which already stopped its own server)
# Exit status: 0 when the server is stopped (or had already exited: then its log's tail is shown);
# 1 when there is nothing recorded (without --if-started), the PID is not our server, or it
# survives SIGKILL.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${NDVM_LLM_STATE:-$ROOT/target/llm-server}
PIDFILE="$STATE/pid"
LOG="$STATE/server.log"

IF_STARTED=""
case "${1:-}" in
    --if-started) IF_STARTED=yes ;;
    "") ;;
    *)
        echo "usage: $0 [--if-started]" >&2
        exit 2
        ;;
esac

log() { printf 'llm-server-stop: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# alive, stop_pid
source "$ROOT/.ci/pid.sh"

if [[ ! -f "$PIDFILE" ]]; then
    if [[ -n "$IF_STARTED" ]]; then
        log "no server recorded in $PIDFILE; nothing to stop"
        exit 0
    fi
    die "no server recorded in $PIDFILE (was .ci/llm-server.sh run, with the same NDVM_LLM_STATE?)"
fi

PID=$(cat "$PIDFILE")
[[ "$PID" =~ ^[0-9]+$ ]] || die "$PIDFILE does not hold a PID: '$PID'"

if ! alive "$PID"; then
    log "the server (pid $PID) had already exited"
    if [[ -f "$LOG" ]]; then
        log "last lines of $LOG:"
        tail -n 20 "$LOG" >&2 || true
    fi
    rm -f "$PIDFILE" "$STATE/url"
    exit 0
fi

# The PID must still be the server: its command line names llama_cpp.server.
cmdline=$(tr '\0' ' ' <"/proc/$PID/cmdline" 2>/dev/null || true)
if [[ "$cmdline" != *llama_cpp.server* ]]; then
    die "pid $PID is not the model server (its command line is: ${cmdline:-unreadable}); not signalling it"
fi

log "stopping the server (pid $PID, $(cat "$STATE/url" 2>/dev/null || echo 'url unknown'))"
stop_pid "$PID" || die "pid $PID survives SIGKILL"
rm -f "$PIDFILE" "$STATE/url"
log "stopped"
