#!/usr/bin/env bash
# One GPU-machine call for the issue-4 work: CUDA numerics of the new components, then the issue-4
# targets, then probes (float64 DMMA vs FMA, split-K on f16 1000^3). Output under $OUT.
set -uo pipefail
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
echo "== numerics (CUDA)"
GEMM_ENGINE_TEST_BACKENDS=cuda timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -m "not nvcc" -rfE \
  tests/test_epilogue.py tests/test_split_k.py tests/test_skinny.py tests/test_dispatch.py tests/test_dmma.py \
  tests/test_int8.py tests/test_algorithms.py tests/test_matmul_semantics.py 2>&1 | tee "$OUT/pytest_cuda.log" | tail -15
echo "== issue 4 targets"
timeout ${ISSUE4_TIMEOUT:-150} python3 bench/issue4_bench.py --repeat 20 --json "$OUT/issue4.json" \
  --markdown "$OUT/issue4.md" > "$OUT/issue4.log" 2>&1
tail -n +5 "$OUT/issue4.md" 2>/dev/null || tail -30 "$OUT/issue4.log"
echo "== probes"
timeout ${PROBE_TIMEOUT:-120} python3 bench/matmul_bench.py --backend cuda --sizes 1000,4096,2048x2048x16384 \
  --dtypes float64 --algorithms simple_unit,simple_dmma,pipelined_dmma --repeat 10 \
  --json "$OUT/probe_f64.json" --markdown "$OUT/probe_f64.md" > "$OUT/probe_f64.log" 2>&1
tail -n +3 "$OUT/probe_f64.md" 2>/dev/null || tail -20 "$OUT/probe_f64.log"
timeout ${PROBE_TIMEOUT:-120} python3 bench/matmul_bench.py --backend cuda --sizes 1000,4093 \
  --dtypes float16 --algorithms pipelined_wgmma,split_k_wgmma,split_k_mma,auto --repeat 20 \
  --json "$OUT/probe_splitk_f16.json" --markdown "$OUT/probe_splitk_f16.md" > "$OUT/probe_splitk_f16.log" 2>&1
tail -n +3 "$OUT/probe_splitk_f16.md" 2>/dev/null || tail -20 "$OUT/probe_splitk_f16.log"
