#!/usr/bin/env bash
# One GPU check (under 8 minutes on an H200): the GPU tests in bf16, then the benchmarks.
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
  echo "gpu tests exit $tests, bench exit $bench"
  exit $(( tests || bench ))
} 2>&1 | tee "$log"
