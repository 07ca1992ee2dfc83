#!/usr/bin/env bash
# One GPU check (about 10 minutes on an H200): the GPU tests in bf16, the benchmarks, then
# replay --gpu against the simulator (speedup >= 2.7x, cache-off TTFT within 1.5x of roofline).
#   bash bench/gpu_check.sh          (a copy of the output goes to $OUT/gpu_check.log if OUT is set)
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
log=${OUT:-/tmp}/gpu_check.log
{
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__,
    'cuda', torch.cuda.is_available())"
  timeout 240 python3 -m pytest tests/test_kernels_triton.py -q -x
  tests=$?
  timeout 300 python3 bench/bench_gpu.py
  bench=$?
  # replay --gpu, llama3-8b shape: 4,096-token prompts, 3,072 of them cached; cache on vs off
  timeout 420 python3 bench/bench_replay_engine.py --engine gpu --model llama3-8b \
    --system-len 3072 --question-len 1024 --requests 16 --repeat 3 --skip-profile
  replay=$?
  echo "gpu tests exit $tests, bench exit $bench, replay exit $replay"
  exit $(( tests || bench || replay ))
} 2>&1 | tee "$log"
