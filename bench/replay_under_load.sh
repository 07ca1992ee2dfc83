#!/usr/bin/env bash
# `pcache replay --engine cpu` on a shared-prefix trace (1,024-token prompts, 768 of them a
# prefix shared by the prompts of a group), without and then with a busy loop on one core:
#
#   bench/replay_under_load.sh [OUT_DIR]
#
# The trace is synthesized (seed 1, 16 requests, 2 groups); the model is bench-llama
# (bench/bench_decode.py --write-model: seeded random weights, 128,256-token vocabulary).
# Each run's JSON report goes to OUT_DIR/{quiet,busy}.json and its stderr (the warnings) to
# OUT_DIR/{quiet,busy}.err; the busy loop (`python -c "while True: pass"`) is started before
# the second run and stopped by its PID after it. ROUNDS (default 1) alternates quiet and busy
# runs that many times. One summary line per run: speedup p50, the per-pair speedups' median
# and IQR, the prediction error, the load average before and after, and the warnings.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
OUT=${1:-${TMPDIR:-/tmp}/pcache-replay-under-load}
ROUNDS=${ROUNDS:-1}
PYTHON=${PYTHON:-python}
MODEL=${MODEL:-${TMPDIR:-/tmp}/pcache-bench-llama}
export PYTHONPATH=$root
mkdir -p "$OUT"
trace="$OUT/shared_prefix_1024.jsonl"
"$PYTHON" -m pcache trace synth --workload shared-prefix -n 16 --groups 2 \
    --prompts-per-group 8 --system-len 768 --question-len 256 --output-len 4 \
    --output-format token-ids --seed 1 -o "$trace"
"$PYTHON" "$here/bench_decode.py" --write-model "$MODEL"

busy=
stop_busy() { [[ -n $busy ]] && kill "$busy" 2>/dev/null; busy=; }
trap stop_busy EXIT

run() {  # label
    "$PYTHON" -m pcache replay "$trace" --engine cpu --model "$MODEL" -f json \
        >"$OUT/$1.json" 2>"$OUT/$1.err" || true
    "$PYTHON" - "$OUT" "$1" <<'EOF'
import json, sys
out, label = sys.argv[1:]
report = json.load(open(f"{out}/{label}.json"))
s = report["stability"]
warnings = [line for line in open(f"{out}/{label}.err") if "warning" in line]
print(
    f"{label:9} speedup p50 {report['speedup_p50']:.2f}x  per-pair {s['pair_speedup_p50']:.2f}x"
    f" (IQR {s['pair_speedup_p25']:.2f}-{s['pair_speedup_p75']:.2f}, {s['relative_iqr']:.0%})"
    f"  prediction error {report['prediction_error_p50']:+.1%}  cached tokens match"
    f" {report['cached_tokens_match']}  threads {s['threads']}  repeated {s['repeated_pairs']}"
    f" unsettled {s['unsettled_pairs']}/{s['pairs']}  load {s['load_average_before']:.2f} ->"
    f" {s['load_average_after']:.2f}  warnings {len(warnings)}"
)
for line in warnings:
    print("          " + line.strip())
EOF
}

for round in $(seq 1 "$ROUNDS"); do
    run "quiet$round"
    "$PYTHON" -c "while True: pass" &
    busy=$!
    run "busy$round"
    stop_busy
done
