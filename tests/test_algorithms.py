"""Every registered algorithm x dtype (tf32 opt-in included) x operand layout x boundary shape,
against a float64 reference, on every backend.

A combination an algorithm cannot run there (tensor cores on OpenCL, say) is skipped with its
SetupError reason; a refusal where the algorithm is meant to run fails the test.
"""
from __future__ import annotations

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.errors import SetupError
from helpers import DTYPES, assert_close, random
from test_matmul_numerics import run_device

#: Ragged on every axis with several cubes and K steps; and a broadcast-free batch.
SHAPES = [(1, 129, 67, 45), (3, 33, 47, 29)]
TENSOR_CORE = {"simple_mma", "simple_wmma", "double_buffering_mma", "pipelined_mma", "pipelined_wgmma"}
TENSOR_CORE_DTYPES = {"float16", "bfloat16", "tf32"}


def must_run(name: str, backend: str, dtype: str, device) -> bool:
    """Whether the algorithm is meant to run this combination (so a SetupError is a bug)."""
    if name in TENSOR_CORE:
        cc = device.compute_capability or (0, 0)
        need = (9, 0) if "wgmma" in name else (8, 0)
        dtypes = {"float16", "bfloat16"} if "wgmma" in name else TENSOR_CORE_DTYPES
        return backend == "cuda" and dtype in dtypes and cc >= need
    return dtype != "tf32"  # unit algorithms and families run every exact dtype everywhere


@pytest.mark.parametrize("dtype", DTYPES + ["tf32"])
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")], ids="-".join)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_algorithm(engine, rng, name, dtype, layouts, shape):
    if dtype in ("bfloat16",) and layouts != ("row", "row"):
        pytest.skip("bfloat16 runs from numpy arrays (device array libraries may lack it): row-major only")
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
        if must_run(name, engine.backend, dtype, engine.device):
            raise
        pytest.skip(f"{name} cannot run {dtype} on {engine.backend}: {exc.reason}")
    if dtype == "tf32":
        from helpers import rel_error, reference
        assert rel_error(result, reference(a, b)) < 5e-3   # 10-bit mantissas, float32 accumulation
    else:
        assert_close(result, a, b, dtype)
