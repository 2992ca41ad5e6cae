# One device call (bash bench/wgmma_gpu.sh): the CUDA tests of pipelined_wgmma, then the sweep
# against pipelined_mma and cuBLAS (bench/results/h100_2026-11-20_wgmma.md).
export PYTHONUNBUFFERED=1
set -o pipefail
GEMM_ENGINE_TEST_BACKENDS=cuda timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_wgmma.py 2>&1 | tee $OUT/pytest.log | grep -E "FAILED|passed|failed" | head -30
timeout 300 python3 bench/wgmma_sweep.py --algs "mma auto,wg auto,wg 128x256 S4 p1,wg 128x256 S4 p0,wg 128x128 S4 p1,wg 256x128 S4 p1" --json $OUT/wgmma.json 2>&1 | tee $OUT/sweep.log | grep -v "^{"
