"""Every registered algorithm x dtype (tf32 opt-in and int8 included) x operand layout x boundary
shape, against a float64 reference (int8: exactly, against int64), on every backend.

A combination an algorithm cannot run there (tensor cores on OpenCL, say) is skipped with its
SetupError reason; a refusal where the algorithm is meant to run fails the test.
"""
from __future__ import annotations

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.errors import SetupError
from helpers import DTYPES, assert_close, random
from device_runs import assert_exact, int8_must_run, operands as int8_operands, run_device, run_device_int8

#: Ragged on every axis with several cubes and K steps; and a broadcast-free batch.
SHAPES = [(1, 129, 67, 45), (3, 33, 47, 29)]
TENSOR_CORE = {"simple_mma", "simple_wmma", "double_buffering_mma", "pipelined_mma", "pipelined_wgmma"}
TENSOR_CORE_DTYPES = {"float16", "bfloat16", "tf32"}
#: FP64 tensor cores (DMMA, CUDA sm_80+): float64 only, every layout.
DMMA = {"simple_dmma", "pipelined_dmma"}


def must_run(name: str, backend: str, dtype: str, device, shape=None) -> bool:
    """Whether the algorithm is meant to run this combination (so a SetupError is a bug)."""
    if name.startswith("quantized"):
        return False   # quantized weights only: tests/algorithms/test_quantized*.py run them
    if dtype == "int8":
        return int8_must_run(name, backend, device)
    if name == "skinny":   # M = 1 or N = 1 only (every float dtype, every backend)
        return dtype != "tf32" and shape is not None and 1 in shape[1:3]
    if name == "specialized_wgmma":
        # TMA needs 16-byte-aligned leading dimensions, which these ragged contiguous shapes lack:
        # tests/algorithms/test_specialized_wgmma.py runs it on aligned (padded) operands.
        return False
    if name == "grouped" or name.startswith("grouped_"):
        # grouped problems only (grouped_matmul): tests/call/test_grouped_call.py runs them
        return False
    if name.startswith("split_k") or name == "skinny_split_k":
        # a long K / M or N = 1 only: tests/batch/test_split_k.py and test_skinny.py run them where they split
        return False
    if name in DMMA:
        return backend == "cuda" and dtype == "float64" and (device.compute_capability or (0, 0)) >= (8, 0)
    if name in TENSOR_CORE:
        cc = device.compute_capability or (0, 0)
        need = (9, 0) if "wgmma" in name else (8, 0)
        dtypes = TENSOR_CORE_DTYPES   # wgmma: tf32 through K-major copies (batch/k_major.py)
        return backend == "cuda" and dtype in dtypes and cc >= need
    return dtype != "tf32"  # unit algorithms and families run every exact dtype everywhere


@pytest.mark.parametrize("dtype", DTYPES + ["tf32", "int8"])
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")], ids="-".join)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_algorithm(engine, rng, name, dtype, layouts, shape):
    if dtype in ("bfloat16",) and layouts != ("row", "row"):
        pytest.skip("bfloat16 runs from numpy arrays (device array libraries may lack it): row-major only")
    if dtype == "int8":   # exact: int32 accumulation, compared element for element
        a, b = int8_operands(rng, shape)
        try:
            result = run_device_int8(engine, a, b, layouts, name)
        except SetupError as exc:
            if must_run(name, engine.backend, dtype, engine.device):
                raise
            pytest.skip(f"{name} cannot run {dtype} on {engine.backend}: {exc.reason}")
        return assert_exact(result, a, b)
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    data = "float32" if dtype == "tf32" else dtype
    a, b = random(rng, lead + (m, k), data), random(rng, lead + (k, n), data)
    precision = "tf32" if dtype == "tf32" else None
    try:
        if dtype == "bfloat16":
            result = engine.matmul(a, b, algorithm=name, precision=precision)
        else:
            result = run_device(engine, a, b, layouts, name, precision)
    except SetupError as exc:
        if must_run(name, engine.backend, dtype, engine.device, shape):
            raise
        pytest.skip(f"{name} cannot run {dtype} on {engine.backend}: {exc.reason}")
    if dtype == "tf32":
        from helpers import rel_error, reference
        assert rel_error(result, reference(a, b)) < 5e-3   # 10-bit mantissas, float32 accumulation
    else:
        assert_close(result, a, b, dtype)
