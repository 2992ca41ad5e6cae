#!/usr/bin/env bash
# Issue 5 on the H100, first call: every CLI sub-command on CUDA, tuning of two problems, the
# overhead benchmarks, the smoke suite with tuning and all baselines, and the CUDA engine tests of
# the call path (matmul was refactored for tuning). Output under $OUT.
set -u
export PYTHONPATH=$PWD
python3 -m pip install -q --no-index --find-links .whl platformdirs 2>&1 | tail -1
export GEMM_ENGINE_CACHE_DIR=$OUT/tuning
t0=$(date +%s)
python3 -m gemm_engine info
python3 -m gemm_engine run --dtype float16 --m 1000 --n 1000 --k 1000
/usr/bin/time -f "run --tune: %e s" python3 -m gemm_engine run --dtype bfloat16 --m 4096 --n 4096 --k 4096 --tune
python3 -m gemm_engine run --dtype bfloat16 --m 4096 --n 4096 --k 4096
python3 -m gemm_engine explain --dtype float16 --m 4096 --n 4096 --k 4096
python3 -m gemm_engine tune --shapes 64x64x65536,1x8192x8192 --dtype float32 --verbose --quiet
python3 -m gemm_engine source --dtype float16 --m 256 --n 256 --k 256 --algorithm pipelined_mma | head -3
python3 bench/overhead.py --backend cuda --json $OUT/overhead.json
echo "elapsed $(( $(date +%s) - t0 )) s"
python3 bench/suite.py --suite smoke --tune --repeat 5 --json $OUT/smoke.json --md $OUT/smoke.md --plot $OUT/smoke.png
echo "elapsed $(( $(date +%s) - t0 )) s"
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_matmul_semantics.py tests/test_epilogue.py 2>&1 | tail -5
echo "elapsed $(( $(date +%s) - t0 )) s"
