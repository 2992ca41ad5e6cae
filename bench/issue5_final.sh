#!/usr/bin/env bash
# Issue 5 on the H100, final call: CUDA tests of the call path and the split-K / mma choices, then
# the full suite (all dtypes) against the tuning cache carried in .tuning_h100 (re-timing the tuned
# choices, tuning only classes not yet in it), one JSON / markdown / plot.
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
mkdir -p $OUT/tuning && cp .tuning_h100/tuning.json $OUT/tuning/
t0=$(date +%s)
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 240 python3 -m pytest -q -p no:cacheprovider -m "not nvcc" tests/test_matmul_semantics.py tests/test_epilogue.py tests/test_split_k.py tests/test_pipelined_mma.py tests/test_skinny.py tests/test_wgmma.py tests/test_dispatch.py 2>&1 | tail -4
echo "elapsed $(( $(date +%s) - t0 )) s"
python3 bench/suite.py --suite full --tune --json $OUT/full.json --md $OUT/full.md --plot $OUT/full.png | tail -75
echo "elapsed $(( $(date +%s) - t0 )) s"
if [ "${1:-}" = probe ]; then
  python3 bench/fastpath_profile.py 2>&1 | head -10
  python3 bench/small_probe.py --json $OUT/small_probe.json
  python3 bench/issue4_bench.py --json $OUT/issue4.json --markdown $OUT/issue4.md 2>&1 | tail -20
fi
