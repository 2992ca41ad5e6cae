"""End-to-end numerics of `Engine.matmul` against a float64 numpy reference, on every backend."""
from __future__ import annotations

import numpy as np
import pytest

from cases import LAYOUT_SHAPES, LAYOUTS, SHAPES
from helpers import DTYPES, assert_close, np_dtype, random


def device_operand(engine, host: np.ndarray, layout: str):
    """``host``'s values as a device array with the given memory layout of its last two axes
    (a column-major operand is a transposed view of a row-major buffer, never a copy)."""
    rt = engine.runtime
    if layout == "row":
        return rt.to_device(host)
    axes = tuple(range(host.ndim - 2)) + (host.ndim - 1, host.ndim - 2)
    return rt.to_device(np.ascontiguousarray(host.transpose(axes))).transpose(axes)


def poisoned_out(engine, shape, dtype):
    out = engine.runtime.to_device(np.full(shape, np.nan, dtype=dtype))
    return out


def run_device(engine, a, b, layouts, algorithm=None, precision=None):
    da, db = device_operand(engine, a, layouts[0]), device_operand(engine, b, layouts[1])
    out = poisoned_out(engine, np.matmul(a[..., :1, :1], b[..., :1, :1]).shape[:-2]
                       + (a.shape[-2], b.shape[-1]), a.dtype)
    result = engine.matmul(da, db, out=out, algorithm=algorithm, precision=precision)
    assert result is out
    return engine.runtime.to_host(out)


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
