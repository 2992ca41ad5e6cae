#!/usr/bin/env bash
# Prepared launches on the H100: CUDA tests of the call path, the launch steps, the small-problem
# probe and the issue-4 table.
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$(mktemp -d)
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 300 python3 -m pytest -q -x -p no:cacheprovider -m "not nvcc" \
  tests/test_matmul_numerics.py tests/test_matmul_semantics.py tests/test_epilogue.py tests/test_split_k.py \
  tests/test_skinny.py tests/test_int8.py tests/test_wgmma.py tests/test_dispatch.py tests/test_algorithms.py 2>&1 | tail -2
python3 bench/launch_micro.py
python3 bench/small_probe.py --json $OUT/small_probe.json
python3 bench/issue4_bench.py --json $OUT/issue4.json --markdown $OUT/issue4.md 2>&1 | tail -20
