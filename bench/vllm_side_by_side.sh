#!/usr/bin/env bash
# `vllm bench serve` against vLLM's CPU build and against `pcache serve`, one after the other,
# same model directory (bench-llama: seeded random weights, the Llama 3.2 tokenizer), same
# model threads, block size 32 on both, loopback only.
#
#   bench/vllm_side_by_side.sh [VENV] [OUT_DIR]
#
# VENV holds vLLM's CPU build (bench/vllm/install.sh VENV, or the one at /work/vllm-venv).
# Each server is started, waited for, benchmarked on the datasets random, prefix_repetition
# and random with a shared prefix (random-prefix), PROMPTS prompts at CONCURRENCY, and
# stopped by its PID. For every run the script keeps vLLM's JSON result, the server's prefix
# cache counters before and after (hits/queries, tokens) and `uptime` before and after, and
# prints one summary line: TTFT p50/p90, TPOT p50, output throughput, prefix hits/queries.
# THREADS (default 1, vLLM's own default on a 2-core machine) is the model's thread count on
# both: vLLM's VLLM_CPU_OMP_THREADS_BIND and OMP_NUM_THREADS for `pcache serve`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
VENV=${1:-/work/vllm-venv}
OUT=${2:-${TMPDIR:-/tmp}/pcache-vllm-side-by-side}
THREADS=${THREADS:-1}
PROMPTS=${PROMPTS:-32}
CONCURRENCY=${CONCURRENCY:-4}
INPUT_LEN=${INPUT_LEN:-256}
OUTPUT_LEN=${OUTPUT_LEN:-64}
MODEL=${MODEL:-${TMPDIR:-/tmp}/pcache-bench-llama-tokenizer}
TOKENIZER_FROM=${TOKENIZER_FROM:-}
SERVERS=${SERVERS:-"vllm pcache"}
PYTHON=${PYTHON:-python}
mkdir -p "$OUT"
export PYTHONPATH=$root HF_HUB_OFFLINE=1

if [[ -z $TOKENIZER_FROM ]]; then  # the Llama 3.2 fixture, built once into the fixtures cache
    TOKENIZER_FROM=$("$PYTHON" "$root/tests/fixtures/build_tokenizers.py" llama3.2 | cut -f2)
fi
"$PYTHON" "$here/bench_decode.py" --write-model "$MODEL" --tokenizer-from "$TOKENIZER_FROM"

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

counter() {  # the sum of one counter's samples on a Prometheus page
    curl -s "$1/metrics" | awk -v name="$2" '$1 ~ "^"name {sum += $NF} END {printf "%d", sum}'
}

wait_healthy() {  # url pid seconds
    local deadline=$((SECONDS + $3))
    until curl -sf "$1/health" >/dev/null; do
        kill -0 "$2" 2>/dev/null || { echo "the server (pid $2) exited" >&2; return 1; }
        ((SECONDS < deadline)) || { echo "the server never became healthy" >&2; return 1; }
        sleep 1
    done
}

DATASETS=(
    "random --dataset-name random --random-input-len $INPUT_LEN --random-output-len $OUTPUT_LEN"
    "prefix_repetition --dataset-name prefix_repetition --prefix-repetition-prefix-len $((INPUT_LEN * 3 / 4)) --prefix-repetition-suffix-len $((INPUT_LEN / 4)) --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len $OUTPUT_LEN"
    "random-prefix --dataset-name random --random-prefix-len $((INPUT_LEN / 2)) --random-input-len $((INPUT_LEN / 2)) --random-output-len $OUTPUT_LEN"
)

run_server() {  # name
    local name=$1 port pid url prefix
    port=$(free_port)
    url="http://127.0.0.1:$port"
    if [[ $name == vllm ]]; then
        VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=2 VLLM_SERVER_DEV_MODE=1 \
            VLLM_CPU_OMP_THREADS_BIND=$([[ $THREADS == 1 ]] && echo 0 || echo "0-$((THREADS - 1))") \
            "$VENV/bin/python" "$VENV/bin/vllm_cli.py" serve "$MODEL" --host 127.0.0.1 \
            --port "$port" --enable-prefix-caching --enable-prompt-tokens-details \
            --block-size 32 --max-model-len 4096 --dtype float32 \
            >"$OUT/$name.log" 2>&1 &
        pid=$!
        prefix=vllm
    else
        OMP_NUM_THREADS=$THREADS "$PYTHON" -m pcache serve --model "$MODEL" --port "$port" \
            --block-size 32 --kv-cache-tokens 65536 >"$OUT/$name.log" 2>&1 &
        pid=$!
        prefix=pcache
    fi
    trap 'kill $pid 2>/dev/null || true' EXIT
    wait_healthy "$url" "$pid" 600
    for entry in "${DATASETS[@]}"; do
        read -r dataset args <<<"$entry"
        local before_hits before_queries
        curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || true
        before_hits=$(counter "$url" "${prefix}:prefix_cache_hits")
        before_queries=$(counter "$url" "${prefix}:prefix_cache_queries")
        echo "$(uptime)" >"$OUT/$name-$dataset.uptime"
        # shellcheck disable=SC2086
        "$VENV/bin/python" "$VENV/bin/vllm_cli.py" bench serve --backend openai \
            --base-url "$url" --endpoint /v1/completions --model "$MODEL" \
            --tokenizer "$MODEL" $args --num-prompts "$PROMPTS" \
            --max-concurrency "$CONCURRENCY" --ignore-eos --seed 0 \
            --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90 \
            --save-result --result-dir "$OUT" --result-filename "$name-$dataset.json" \
            >"$OUT/$name-$dataset.txt" 2>&1
        echo "$(uptime)" >>"$OUT/$name-$dataset.uptime"
        echo "$(($(counter "$url" "${prefix}:prefix_cache_hits") - before_hits))" \
            "$(($(counter "$url" "${prefix}:prefix_cache_queries") - before_queries))" \
            >"$OUT/$name-$dataset.prefix"
        "$PYTHON" - "$OUT" "$name" "$dataset" <<'EOF'
import json, sys
out, name, dataset = sys.argv[1:]
result = json.load(open(f"{out}/{name}-{dataset}.json"))
hits, queries = open(f"{out}/{name}-{dataset}.prefix").read().split()
load = [line.split("load average:")[1].strip() for line in open(f"{out}/{name}-{dataset}.uptime")]
print(
    f"{name:7} {dataset:18} TTFT p50 {result['median_ttft_ms']:8.1f} p90 {result['p90_ttft_ms']:8.1f}"
    f"  TPOT p50 {result['median_tpot_ms']:7.2f} ms  out {result['output_throughput']:7.1f} tok/s"
    f"  prefix hits {hits}/{queries}  completed {result['completed']}"
    f"  load {load[0]} -> {load[1]}"
)
EOF
    done
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    trap - EXIT
}

for server in $SERVERS; do
    run_server "$server"
done
