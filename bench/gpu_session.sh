#!/usr/bin/env bash
# One call on the GPU machine: CUDA numerics tests, resource usage of the main kernels, and the
# benchmark table against cuBLAS. Writes logs and results under $OUT (or bench/results/ by default).
#   bash bench/gpu_session.sh            (from the repository root, on a machine with CuPy and a GPU)
set -uo pipefail
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -c "import cupy, numpy, ml_dtypes; print('cupy', cupy.__version__, 'numpy', numpy.__version__);
try:
    cupy.asarray(numpy.ones(2, ml_dtypes.bfloat16)); print('cupy bfloat16: yes')
except Exception as e: print('cupy bfloat16: no', type(e).__name__, e)" 2>&1 | tee -a "$OUT/gpu.txt"

BACKENDS=cuda
if [ -d .whl ]; then  # PyOpenCL wheels carried along (shared/tools/gpu_machine_wheels.sh): NVIDIA's OpenCL too
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site \
    && mkdir -p /tmp/ocl && echo libnvidia-opencl.so.1 > /tmp/ocl/nvidia.icd \
    && export OCL_ICD_VENDORS=/tmp/ocl GEMM_ENGINE_OPENCL_DEVICE=NVIDIA && BACKENDS=cuda,opencl
fi
echo "== numerics (pytest, backends: $BACKENDS)"
GEMM_ENGINE_TEST_BACKENDS=$BACKENDS timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -m "not nvcc" \
  -rfE tests ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25

echo "== benchmark"
# Unit (register FMA) algorithms on exact float32; tensor-core ones on f16 / bf16 / tf32 (opt-in).
UNIT_ALGS=${UNIT_ALGS:-simple_unit,double_buffering_unit,specialized,ordered,auto}
MMA_ALGS=${MMA_ALGS:-simple_mma,simple_wmma,double_buffering_mma,pipelined_mma,pipelined_wgmma,auto}
bench() {  # bench NAME DTYPES ALGORITHMS
  timeout ${4:-${BENCH_TIMEOUT:-200}} python3 bench/matmul_bench.py --backend cuda --suite ${SUITE:-issue3} \
    --dtypes "$2" --algorithms "$3" --repeat ${REPEAT:-20} \
    --json "$OUT/bench_$1.json" --markdown "$OUT/bench_$1.md" > "$OUT/bench_$1.log" 2>&1
  tail -n +3 "$OUT/bench_$1.md" 2>/dev/null || tail -20 "$OUT/bench_$1.log"
}
bench f32 float32 "$UNIT_ALGS" ${F32_TIMEOUT:-110}
bench mma ${MMA_DTYPES:-float16,bfloat16,tf32} "$MMA_ALGS" ${MMA_TIMEOUT:-240}

if [ "${ISSUE4:-1}" = 1 ]; then
  echo "== issue 4 targets (fusion, skinny, batched, split-K)"
  timeout ${ISSUE4_TIMEOUT:-180} python3 bench/issue4_bench.py --repeat ${REPEAT:-20} \
    --json "$OUT/issue4.json" --markdown "$OUT/issue4.md" > "$OUT/issue4.log" 2>&1
  tail -n +5 "$OUT/issue4.md" 2>/dev/null || tail -30 "$OUT/issue4.log"
fi
