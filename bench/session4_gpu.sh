#!/usr/bin/env bash
# Last H100 call of session 4: the CUDA tests the session's changes touch, then the issue-4 and tf32
# benchmarks (results under $OUT).
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
mkdir -p $OUT/tuning
nvidia-smi --query-gpu=name --format=csv,noheader
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 330 python3 -m pytest -q -p no:cacheprovider -m "not nvcc" \
    tests/test_matmul_numerics.py tests/test_matmul_semantics.py tests/test_epilogue.py tests/test_split_k.py \
    tests/test_wgmma.py tests/test_dispatch.py tests/test_skinny.py tests/test_cuda_launch.py tests/test_tuning.py \
    tests/test_explain.py 2>&1 | tail -8
timeout 120 python3 bench/issue4_bench.py --json $OUT/issue4.json --markdown $OUT/issue4.md > $OUT/issue4.log 2>&1
grep -i "vector\|batched\|fused relu(a@b+bias) bf16 8192x8192x64 | gemm\|torch relu(a@b\|split-K" $OUT/issue4.md | cut -c1-170
timeout 150 python3 bench/tf32_bench.py --json $OUT/tf32.json --markdown $OUT/tf32.md > $OUT/tf32.log 2>&1
grep "auto\|torch" $OUT/tf32.md
