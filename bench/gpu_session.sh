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
timeout ${BENCH_TIMEOUT:-240} python3 bench/matmul_bench.py --backend cuda --suite ${SUITE:-issue3} \
  --dtypes ${DTYPES:-float32,float16,bfloat16} --repeat ${REPEAT:-20} \
  --json "$OUT/bench_cuda.json" --markdown "$OUT/bench_cuda.md" > "$OUT/bench_stdout.log" 2>&1
tail -40 "$OUT/bench_cuda.md" 2>/dev/null || tail -40 "$OUT/bench_stdout.log"
