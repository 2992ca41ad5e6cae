#!/usr/bin/env bash
# The one script for a GPU machine: carried wheels, then the named stages, each under a timeout,
# everything written under $OUT, a table of the stages last.
#
#   bash bench/gpu.sh [STAGE ...]               from the repository root (CuPy, torch and a GPU there)
#   STAGES="tests special" bash bench/gpu.sh    the same, stages from the environment
#
# Stages (default: tests suite), in the order given; each tool refreshes its current table,
# written as $OUT/<device>/<table>.md (BENCH_RESULTS=$OUT: copy it to bench/results/<device>/):
#   tests       CUDA pytest: GEMM_ENGINE_TEST_BACKENDS=cuda pytest -m "not nvcc" tests (NVIDIA's
#               OpenCL too when .whl/ carries PyOpenCL)                       -> tests.log
#   opencl_tests the whole suite on NVIDIA's OpenCL alone (GEMM_ENGINE_TEST_BACKENDS=opencl; issue 35):
#               fails, saying why, unless .whl/ carries PyOpenCL and NVIDIA's platform loads
#                                                                              -> opencl_tests.log
#   hopper      bench/hopper_gemm.py --repeat 30: the Hopper rows             -> hopper_rows.md
#   suite       bench/suite.py --suite $SUITE (full), --tune when TUNE=1       -> suite_$SUITE.md, suite.{json,png}
#   special     bench/special_cases.py: fused, skinny, batched, split-K        -> special_cases.md
#   tf32        bench/tf32_layouts.py: tf32 by b's layout, vs torch's tf32     -> tf32_layouts.md
#   lowp        bench/low_precision.py: int8, fp8 (scales), float64 vs torch   -> low_precision.md
#   grouped     the grouped GEMM's CUDA tests, then bench/grouped.py (MoE rows vs torch._grouped_mm,
#               CUDA-graph replay with new routing)                              -> grouped.md
#   quantized   bench/quantized.py $QUANTIZED_ARGS: int4 / int8 / fp8 weights, bf16 x (issue 31) -> quantized.md
#   f32         bench/matmul_bench.py --suite square, float32 unit algorithms  -> square_float32.md
#   tensorcore  bench/matmul_bench.py --suite square, f16 / bf16 / tf32        -> square_float16_bfloat16_tf32.md
#   float64     bench/matmul_bench.py, float64 register FMA against DMMA       -> float64_algorithms.md
#   overhead    bench/overhead.py, then bench/per_call_overhead.py             -> overhead.md, per_call_steps.md
#   probes      bench/probe_small_problems.py, bench/probe_gemv_bandwidth.py   -> probe_small_problems.json, gemv_bandwidth.md
#   opencl      bench/opencl_tensor_cores.py $OPENCL_ARGS: NVIDIA's OpenCL (probe, checks, tensor-core
#               rows) vs cuBLAS; needs .whl/ (../shared/tools/gpu_machine_wheels.sh) -> opencl_tensor_cores.md
#   oclmma      bench/mma_sync_peak.py (mma.sync's ceiling, registers only, CUDA and OpenCL) and
#               bench/opencl_mma_probe.py (pipelined_mma tilings: padded / swizzled rings, both backends,
#               checked then timed at 4096^3); about 4 minutes; needs .whl/ for the OpenCL half
#                                                            -> mma_sync_peak.md, opencl_mma_probe.md
#   sweeps      the tiling sweeps (mma, wgmma, sgemm, dmma, special cases)     -> sweep_*.json
#   shapes      bench/shape_sweep.py --subset $SUBSET_ROWS (default targets)         -> shape_sweep.md, shape_sweep_<subset>.json
#   probe       bench/shape_probe.py --preset $PRESET (default decode)          -> shape_probe.md, shape_probe_<preset>.json
#   rules       issue 28's selector rules on rows they were not fit on, about 4 minutes: the CUDA tests of
#               the copies, decode tilings, skinny rows and fused split calls; bench/shape_sweep.py's
#               decode rows at M = 1, 4, 16, 48, 96 of seven weights (only 16 x 4096 x 4096 was probed);
#               bench/shape_probe.py --preset rules (copy_ragged both ways; long K's tiles) -> rules.log,
#               shape_sweep_heldout.md, shape_probe_rules.md
#   distributed bench/distributed.py --gpus $GPUS (default: every GPU; NCCL, NVLink multicast off):
#               all-gather + GEMM, GEMM + reduce-scatter, the TP MLP block (issue 32) -> distributed_<P>gpu.md
#
# Environment: OUT (default bench/results/out; on a device machine its $OUT), REPEAT (timed calls per
# measurement, default 20; the suite's 10), TIMEOUT (seconds per stage, default 540), SUITE (full),
# TUNE=1 (the suite also times each row's tuned choice, tuning only the classes not yet in the tuning
# cache: $OUT/tuning or GEMM_ENGINE_CACHE_DIR, seeded from .tuning_h100/tuning.json when that is carried),
# QUANTIZED_ARGS (the quantized stage's arguments to bench/quantized.py, e.g. --shapes 4096x4096 --variants).
set -uo pipefail
OUT=${OUT:-bench/results/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 BENCH_RESULTS=$OUT
# The tuning cache of this run (no user cache from an earlier one; no need for platformdirs).
export GEMM_ENGINE_CACHE_DIR=${GEMM_ENGINE_CACHE_DIR:-$OUT/tuning}
STAGES=${*:-${STAGES:-tests suite}}
REPEAT=${REPEAT:-20}
# A device call's command gets at most 10 minutes: a stage gets 9 unless TIMEOUT says otherwise.
TIMEOUT=${TIMEOUT:-540}
KNOWN=" tests opencl_tests hopper suite special tf32 lowp grouped quantized f32 tensorcore float64 overhead probes sweeps shapes probe rules distributed opencl oclmma "
for s in $STAGES; do
  [[ $KNOWN == *" $s "* ]] || { echo "unknown stage '$s'; stages:$KNOWN(see the head of bench/gpu.sh)"; exit 2; }
done

BACKENDS=cuda
if ls .whl/*.whl >/dev/null 2>&1; then   # wheels carried along (platformdirs, PyOpenCL, ...)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
  if python3 -c "import pyopencl" 2>/dev/null; then   # NVIDIA's OpenCL through the ICD loader
    mkdir -p /tmp/ocl && echo libnvidia-opencl.so.1 > /tmp/ocl/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/ocl GEMM_ENGINE_OPENCL_DEVICE=NVIDIA
    BACKENDS=cuda,opencl
  fi
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" >> "$OUT/gpu.txt" 2>&1
echo "$(head -1 "$OUT/gpu.txt"); stages: $STAGES; output: $OUT"

each() {  # run every command given (one string each), even after a failure; the last failure's status
  local rc=0 c
  for c in "$@"; do eval "$c" || rc=$?; done
  return $rc
}

bench() {  # bench NAME DTYPES ALGORITHMS: matmul_bench.py on the square sizes (table square_<dtypes>)
  python3 bench/matmul_bench.py --backend cuda --suite square --dtypes "$2" --algorithms "$3" \
    --repeat "$REPEAT" --json "$OUT/$1.json"
}

stage() {  # the commands of one stage
  case $1 in
    tests) GEMM_ENGINE_TEST_BACKENDS=$BACKENDS python3 -m pytest -q -p no:cacheprovider -m "not nvcc" -rfE tests ;;
    opencl_tests)
      [ "$BACKENDS" = cuda,opencl ] || { echo "opencl_tests: no PyOpenCL (carry its wheel for this Python in .whl/)"; return 1; }
      python3 -c 'import pyopencl as cl; p = [p for p in cl.get_platforms() if "NVIDIA" in p.name]
assert p, f"no NVIDIA OpenCL platform (libnvidia-opencl.so.1); platforms: {[x.name for x in cl.get_platforms()]}"
print("opencl:", p[0].version, p[0].get_devices()[0].name, p[0].get_devices()[0].driver_version)' || return 1
      GEMM_ENGINE_TEST_BACKENDS=opencl python3 -m pytest -q -p no:cacheprovider -m "not nvcc" -rfE tests ;;
    suite)
      if [ "$TUNE" = 1 ] && [ -f .tuning_h100/tuning.json ] && [ ! -f "$GEMM_ENGINE_CACHE_DIR/tuning.json" ]; then
        mkdir -p "$GEMM_ENGINE_CACHE_DIR" && cp .tuning_h100/tuning.json "$GEMM_ENGINE_CACHE_DIR/"
      fi
      python3 bench/suite.py --suite "$SUITE" $([ "$TUNE" = 1 ] && echo --tune) \
        --json "$OUT/suite.json" --plot "$OUT/suite.png" ;;
    hopper) python3 bench/hopper_gemm.py --repeat 30 --json "$OUT/hopper_gemm.json" ;;
    special) python3 bench/special_cases.py --repeat "$REPEAT" --json "$OUT/special_cases.json" ;;
    lowp) python3 bench/low_precision.py --repeat "$REPEAT" --json "$OUT/low_precision.json" ;;
    grouped) each 'GEMM_ENGINE_TEST_BACKENDS=cuda python3 -m pytest -q -p no:cacheprovider -rfE tests/algorithms/test_grouped_specialized.py tests/test_grouped_matmul.py' \
                  'python3 bench/grouped.py --repeat 10 --json "$OUT/grouped.json"' ;;
    quantized) python3 bench/quantized.py $QUANTIZED_ARGS --json "$OUT/quantized.json" ;;
    tf32) python3 bench/tf32_layouts.py --repeat "$REPEAT" --json "$OUT/tf32_layouts.json" ;;
    f32) bench f32 float32 simple_unit,double_buffering_unit,specialized,ordered,auto ;;
    tensorcore) bench tensorcore float16,bfloat16,tf32 \
                  simple_mma,simple_wmma,double_buffering_mma,pipelined_mma,pipelined_wgmma,auto ;;
    float64) python3 bench/matmul_bench.py --backend cuda --sizes 1000,4096,2048x2048x16384 --dtypes float64 \
               --algorithms simple_unit,simple_dmma,pipelined_dmma,auto --repeat 10 \
               --json "$OUT/float64.json" --table float64_algorithms ;;
    overhead) each 'python3 bench/overhead.py --backend cuda --json "$OUT/overhead.json"' \
                   'python3 bench/per_call_overhead.py' ;;
    probes) each 'python3 bench/probe_small_problems.py --json "$OUT/probe_small_problems.json"' \
                 'python3 bench/probe_gemv_bandwidth.py --json "$OUT/probe_gemv_bandwidth.json"' ;;
    shapes) python3 bench/shape_sweep.py --subset "${SUBSET_ROWS:-targets}" --json "$OUT/shape_sweep_${SUBSET_ROWS:-targets}.json" ;;
    distributed) NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
                   python3 bench/distributed.py --gpus "${GPUS:-$(nvidia-smi -L | wc -l)}" --json "$OUT/distributed.json" ;;
    probe) python3 bench/shape_probe.py --preset "${PRESET:-decode}" --json "$OUT/shape_probe_${PRESET:-decode}.json" ;;
    rules) each 'GEMM_ENGINE_TEST_BACKENDS=cuda python3 -m pytest -q -p no:cacheprovider -m "not nvcc" -rfE tests/batch/test_k_major.py tests/algorithms/test_decode.py tests/algorithms/test_specialized_wgmma.py tests/global_/test_skinny.py tests/call/test_launch.py' \
                'python3 bench/shape_sweep.py --subset decode --max-tokens 128 --part 1/2 --budget 70 --table shape_sweep_heldout --json "$OUT/shape_sweep_heldout.json"' \
                'python3 bench/shape_probe.py --preset rules --max-candidates 4 --budget 60 --table shape_probe_rules --json "$OUT/shape_probe_rules.json"' ;;
    oclmma) each 'python3 bench/mma_sync_peak.py --quick --budget 50 --json "$OUT/mma_sync_peak.json"' \
                 'python3 bench/opencl_mma_probe.py --budget 170 --json "$OUT/opencl_mma_probe.json"' ;;
    opencl) python3 bench/opencl_tensor_cores.py --repeat "$REPEAT" ${OPENCL_ARGS:-} --json "$OUT/opencl_tensor_cores.json" ;;
    sweeps) each 'python3 bench/sweep_mma_tilings.py --dtypes float16,bfloat16 --json "$OUT/sweep_mma.json"' \
                 'python3 bench/sweep_wgmma_tilings.py --json "$OUT/sweep_wgmma.json"' \
                 'python3 bench/sweep_sgemm_tilings.py --json "$OUT/sweep_sgemm.json"' \
                 'python3 bench/sweep_dmma_tilings.py --json "$OUT/sweep_dmma.json"' \
                 'python3 bench/sweep_special_case_tilings.py --json "$OUT/sweep_special_cases.json"' ;;
  esac
}

# Each stage runs in a child shell under its own timeout: its whole output in $OUT/<stage>.log, its
# last 30 lines on the screen.
export -f stage each bench
export OUT REPEAT BACKENDS QUANTIZED_ARGS=${QUANTIZED_ARGS:-} SUITE=${SUITE:-full} TUNE=${TUNE:-0} SUBSET_ROWS=${SUBSET_ROWS:-targets} PRESET=${PRESET:-decode}
summary="" failed=0
for s in $STAGES; do
  echo "== $s"
  t0=$(date +%s)
  timeout "$TIMEOUT" bash -c "stage $s" 2>&1 | tee "$OUT/$s.log" | tail -n 30
  rc=${PIPESTATUS[0]}
  case $rc in 0) status=ok ;; 124) status="timed out (${TIMEOUT} s)" ;; *) status="failed (rc $rc)" ;; esac
  [ "$rc" = 0 ] || failed=1
  summary+=$(printf '%-11s %-22s %5s s  %s' "$s" "$status" "$(( $(date +%s) - t0 ))" "$OUT/$s.log")$'\n'
done
echo
echo "stage       status                 time    log"
printf '%s' "$summary"
exit $failed
