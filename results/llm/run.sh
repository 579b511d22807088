#!/usr/bin/env bash
# One measured run of tasks/symreg-llm.yaml against the server of .ci/llm-server.sh
# (eval "$(bash .ci/llm-server.sh)" first): results/llm/run.sh DIR PROMPT MODE BUDGET REQUESTS
#   PROMPT   a file of bootstrap/prompts/ (symreg.md, symreg-three.md)
#   MODE     alone (evolve: false) or seeds (the default: the model seeds evolution)
#   BUDGET   the task's budget line, e.g. "budget: {seconds: 60}"
# Changes only the URL, model, key, concurrency (2), max_requests, prompt, cache, budget and
# (the shipped task has no success stop); prints results/llm/stats.py's line for the run folder DIR/run.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir=$1 prompt=$2 mode=$3 budget=$4 requests=$5
rm -rf "$dir" && mkdir -p "$dir"
sed -e "s#http://127.0.0.1:8000/v1#$NDVM_LLM_BASE_URL#" \
    -e "s#model: local-model#model: $NDVM_LLM_MODEL\n  api_key: \"\"#" \
    -e "s#concurrency: 4#concurrency: 2#" \
    -e "s#max_requests: 64#max_requests: $requests#" \
    -e "s#../bootstrap/prompts/symreg.md#$root/bootstrap/prompts/$prompt#" \
    -e "s#../caches/symreg-llm.jsonl#cache.jsonl#" \
    -e "s#budget: {seconds: 60}#$budget#" "$root/tasks/symreg-llm.yaml" > "$dir/task.yaml"
if [ "$mode" = alone ]; then sed -i 's#^  kind: llm#  kind: llm\n  evolve: false#' "$dir/task.yaml"; fi
(cd "$dir" && "$root/target/debug/ndvm-search" run task.yaml --out run -q > out.txt 2>&1 || true)
python3 "$root/results/llm/stats.py" "$dir"
