#!/usr/bin/env bash
# One GPU check (under 8 minutes on an H200): the GPU tests in bf16, then the benchmarks.
#   bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 240 python -m pytest tests/test_kernels_triton.py -q -p no:cacheprovider
tests=$?
timeout 300 python bench/bench_gpu.py
bench=$?
echo "gpu tests exit $tests, bench exit $bench"
exit $(( tests || bench ))
