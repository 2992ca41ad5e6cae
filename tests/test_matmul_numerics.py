"""End-to-end numerics of `Engine.matmul` against a float64 numpy reference, on every backend."""
from __future__ import annotations

import numpy as np
import pytest

from cases import LAYOUT_SHAPES, LAYOUTS, SHAPES
from device_runs import device_operand, poisoned_out, run_device  # noqa: F401
from helpers import DTYPES, assert_close, np_dtype, random


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_device_arrays_row_major(engine, rng, dtype, shape):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    a, b = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    assert_close(run_device(engine, a, b, ("row", "row")), a, b, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("layouts", LAYOUTS, ids="-".join)
@pytest.mark.parametrize("shape", LAYOUT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_device_arrays_layouts(engine, rng, dtype, layouts, shape):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    a, b = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    assert_close(run_device(engine, a, b, layouts), a, b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[7]], ids=lambda s: "x".join(map(str, s)))
def test_numpy_arrays(engine, rng, dtype, shape):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    a, b = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    result = engine.matmul(a, b)
    assert isinstance(result, np.ndarray) and result.dtype == np_dtype(dtype)
    assert_close(result, a, b, dtype)


def test_bfloat16_rounds_to_nearest_even(engine):
    """Output rounding of bfloat16 must match ml_dtypes' (round to nearest even), not truncate."""
    if "bfloat16" not in DTYPES:
        pytest.skip("ml_dtypes (numpy bfloat16) not installed")
    bf16 = np_dtype("bfloat16")
    # 1 + 2^-8 + 2^-9 etc. are not representable in bf16: the products land between neighbours.
    a = np.array([[1.0, 1.0]], dtype=bf16)
    b = np.array([[1.0], [2.0 ** -8 + 2.0 ** -10]], dtype=bf16)
    expect = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf16)
    np.testing.assert_array_equal(engine.matmul(a, b).view(np.uint16), expect.view(np.uint16))
