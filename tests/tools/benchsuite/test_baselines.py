"""tools/benchsuite/baselines.py: each backend's baselines by name (others refused by name), the numpy
baseline's product from device arrays (fused: relu(a @ b + bias); half precision upcast, with its
note), and baselines that cannot run saying why."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.tools.benchsuite.baselines import ALL, NATIVE, NumpyMatmul, baselines_for
from gemm_engine.tools.benchsuite.rows import Row


def test_by_backend(opencl_engine):
    names = [b.name for b in baselines_for(opencl_engine.runtime)]
    assert set(names) == {cls.name for cls in ALL if cls.backend == "opencl"} and "numpy" in names
    assert [b.name for b in baselines_for(opencl_engine.runtime, "numpy")] == ["numpy"]
    with pytest.raises(ValueError, match="'cupy' not available on the opencl backend"):
        baselines_for(opencl_engine.runtime, "numpy,cupy")
    assert set(NATIVE) <= {cls.name for cls in ALL}


@pytest.mark.parametrize("dtype, fused", [("float32", False), ("float16", True)])
def test_numpy_baseline_computes_the_rows_product(opencl_engine, rng, dtype, fused):
    row = Row("t", "fused" if fused else "square", 1, 9, 7, 5, dtype, fused=fused)
    a = rng.standard_normal((9, 5)).astype(dtype)
    b = rng.standard_normal((5, 7)).astype(dtype)
    bias = rng.standard_normal(7).astype(dtype) if fused else None
    rt = opencl_engine.runtime
    base = NumpyMatmul(rt)
    run = base.prepare(row, rt.to_device(a), rt.to_device(b), rt.to_device(bias) if fused else None)
    want = a.astype(np.float32) @ b.astype(np.float32)
    if fused:
        want = np.maximum(want + bias.astype(np.float32), 0)
    np.testing.assert_allclose(run(), want, rtol=1e-6)
    assert bool(base.note(row)) == (dtype == "float16")


def test_unavailable_baselines_say_why(opencl_engine):
    for b in baselines_for(opencl_engine.runtime):
        ok, why = b.available()
        assert ok or why
