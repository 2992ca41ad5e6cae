#!/usr/bin/env bash
# H100 call for the skinny split kernel: its CUDA tests, then bench/issue4_bench.py (results under $OUT).
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
mkdir -p $OUT/tuning
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m "not nvcc" \
    tests/test_skinny.py tests/test_split_k.py 2>&1 | tail -6
timeout 300 python3 bench/issue4_bench.py --json $OUT/issue4.json --markdown $OUT/issue4.md > $OUT/issue4.log 2>&1
cat $OUT/issue4.md
