# .ci/pid.sh: stopping a process by its recorded PID, sourced by .ci/llm-server.sh and
# .ci/llm-server-stop.sh (the sourcing script defines `log`). Never looks a process up by name.

# Alive = exists and is not a zombie (a zombie whose parent has not reaped it yet counts as gone).
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ "$state" != Z && "$state" != X ]]
}

# Waits up to $2 half-seconds for PID $1 to be gone.
wait_gone() {
    local _
    for _ in $(seq 1 "$2"); do
        alive "$1" || return 0
        sleep 0.5
    done
    ! alive "$1"
}

# SIGTERM to PID $1, up to 10 s, then SIGKILL, up to 5 s more; fails when it survives that.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    wait_gone "$1" 20 && return 0
    log "still running 10 s after SIGTERM; sending SIGKILL"
    kill -KILL "$1" 2>/dev/null || true
    wait_gone "$1" 10
}
