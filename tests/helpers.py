"""Shared test helpers: random operands, float64 references, relative error, tolerances."""
from __future__ import annotations

import numpy as np

from gemm_engine.dtypes import bfloat16_dtype

BF16 = bfloat16_dtype()

#: Relative Frobenius-norm error allowed per dtype (the output is rounded to its dtype, so the
#: bound is a few units of that dtype's rounding, not of the float32 accumulation).
TOLERANCE = {"float64": 1e-12, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2}

DTYPES = ["float32", "float64", "float16"] + (["bfloat16"] if BF16 is not None else [])


def np_dtype(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype(name)


def random(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Fresh standard-normal data (never zeros or ones alone), rounded to ``dtype``."""
    return rng.standard_normal(shape).astype(np_dtype(dtype) if isinstance(dtype, str) else dtype)


def reference(a, b) -> np.ndarray:
    return np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def rel_error(result, ref) -> float:
    result = np.asarray(result, dtype=np.float64)
    assert result.shape == ref.shape, (result.shape, ref.shape)
    assert np.all(np.isfinite(result)), "non-finite values (unwritten poisoned elements?)"
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(result - ref) / (denom if denom else 1.0))


def assert_close(result, a, b, dtype: str):
    err = rel_error(result, reference(a, b))
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e} > {TOLERANCE[dtype]:.1e} for {dtype}"


def lane_env(tile, unit) -> dict:
    """{"UNIT_ID": unit, and each of the tile's lane names (``tile.lanes``)} for evaluating the
    tile's rendered index expressions in Python (they use only parentheses, +, *, /, %, &, >>, <<;
    ``unit`` may be an int or a numpy array of units)."""
    import re
    env = {"UNIT_ID": unit}
    for name, expr in tile.lanes:
        env[name] = eval(re.sub(r"(?<![/*])/(?![/*])", "//", expr), {}, dict(env))
    return env


def cuda_engine_or_skip(min_cc: tuple = (8, 0), needs: str = "sm_80"):
    """(engine, cupy) of a CUDA engine whose device is at least ``min_cc``; pytest.skip saying why
    not otherwise (no CuPy, no GPU, an older device). For the CUDA numerics tests' fixtures."""
    import pytest
    cp = pytest.importorskip("cupy", reason="the CUDA numerics test needs CuPy")
    from gemm_engine import Engine
    from gemm_engine.runtime.cuda import cuda_available
    if not cuda_available():
        pytest.skip("CuPy sees no CUDA GPU")
    engine = Engine("cuda")
    if (engine.device.compute_capability or (0, 0)) < min_cc:
        pytest.skip(f"{engine.device.name} is below {needs}")
    return engine, cp


def device_col_major(cp, host):
    """``host`` on the device as a transposed view of a column-major copy (its last two axes)."""
    return cp.asarray(np.ascontiguousarray(np.swapaxes(host, -1, -2))).swapaxes(-1, -2)


def heuristic_unit(engine) -> str:
    """The register-FMA algorithm ``auto`` takes for a plain float32 product on ``engine``'s device:
    the CPU path on a CPU OpenCL device (selector/cpu.py), simple_unit elsewhere."""
    dev = engine.device
    return "direct_vector" if dev.backend == "opencl" and dev.vendor == "cpu" else "simple_unit"


#: AMD / Intel matrix-core algorithms: no such device runs the tests (built offline:
#: tests/algorithms/test_matrix_cores.py).
MATRIX_CORES = frozenset({"simple_mfma", "double_buffering_mfma", "simple_wmma_gfx11", "simple_dpas",
                          "double_buffering_dpas"})
#: Algorithms that render OpenCL C only (no CUDA source to compile): the CPU path and the AMD / Intel tiles.
OPENCL_ONLY = MATRIX_CORES | {"direct_vector"}
