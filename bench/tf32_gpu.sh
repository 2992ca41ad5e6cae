#!/usr/bin/env bash
# H100 call for the tf32 wgmma path: its CUDA tests, then bench/tf32_bench.py (results under $OUT).
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
mkdir -p $OUT/tuning
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 240 python3 -m pytest -q -x -p no:cacheprovider -m "not nvcc" \
    tests/test_wgmma.py tests/test_algorithms.py -k "test_wgmma or (pipelined_wgmma and tf32)" 2>&1 | tail -12
timeout 300 python3 bench/tf32_bench.py ${TF32_ARGS:-} --json $OUT/tf32.json --markdown $OUT/tf32.md
