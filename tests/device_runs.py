"""Shared by the numerics tests: operands on a backend's device in a given layout, poisoned outputs,
and the exact int8 -> int32 checks."""
from __future__ import annotations

import numpy as np


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


#: Written into every out before a call: an element the kernel does not write keeps it and fails.
SENTINEL = np.iinfo(np.int32).min + 12345


def random_int8(rng: np.random.Generator, shape) -> np.ndarray:
    """Uniform over all of int8, with both extremes present (-128 * -128 is the largest product)."""
    x = rng.integers(-128, 128, size=shape, dtype=np.int8)
    if x.size >= 2:
        x.flat[0], x.flat[-1] = -128, 127
    return x


def exact(a, b) -> np.ndarray:
    """The int32 result the engine must give: numpy's product in int64, checked to fit int32."""
    ref = np.matmul(np.asarray(a, np.int64), np.asarray(b, np.int64))
    info = np.iinfo(np.int32)
    assert info.min <= ref.min() and ref.max() <= info.max, "reference does not fit int32"
    return ref.astype(np.int32)


def assert_exact(result, a, b):
    result = np.asarray(result)
    assert result.dtype == np.int32, result.dtype
    ref = exact(a, b)
    assert result.shape == ref.shape
    assert not (result == SENTINEL).any() or (ref == SENTINEL).any(), "unwritten output elements"
    np.testing.assert_array_equal(result, ref)


def run_device_int8(engine, a, b, layouts, algorithm=None):
    """``a @ b`` on device arrays of the given layouts, into a device out poisoned with SENTINEL."""
    da, db = device_operand(engine, a, layouts[0]), device_operand(engine, b, layouts[1])
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    out = engine.runtime.to_device(np.full(shape, SENTINEL, np.int32))
    result = engine.matmul(da, db, out=out, algorithm=algorithm)
    assert result is out
    return engine.runtime.to_host(out)


def operands(rng, shape):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    return random_int8(rng, lead + (m, k)), random_int8(rng, lead + (k, n))


#: Algorithms meant to run int8 everywhere (register FMA in int32, or a family falling back to it);
#: INT8_TENSOR_CORE run it on CUDA sm_80+ through mma.sync s8. Any other algorithm may refuse int8,
#: but only with a SetupError (e.g. split-K's float partial sums, wgmma, the float-only skinny path).
INT8_EVERYWHERE = {"simple_unit", "double_buffering_unit", "specialized_unit", "ordered_unit",
                   "auto", "simple", "double_buffering", "specialized", "ordered"}
INT8_TENSOR_CORE = {"simple_mma", "double_buffering_mma"}


def int8_must_run(name: str, backend: str, device) -> bool:
    """Whether algorithm ``name`` is meant to run int8 there (so a SetupError is a bug)."""
    if name in INT8_EVERYWHERE:
        return True
    cc = device.compute_capability or (0, 0)
    return name in INT8_TENSOR_CORE and backend == "cuda" and cc >= (8, 0)
