"""Shared by the float64 gradient tests (gradcheck on PoCL): the default engine on the OpenCL device
(a skip where it lacks float64), imported as an autouse fixture, and seeded leaf tensors."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")


@pytest.fixture(autouse=True)
def float64_default_engine(opencl_engine, monkeypatch):
    from gemm_engine import api
    if not opencl_engine.device.fp64:
        pytest.skip("gradcheck runs in float64, which this OpenCL device lacks")
    monkeypatch.setattr(api, "_default_engine", opencl_engine)


def leaf(*shape, seed=0):
    """A float64 tensor that requires grad, its values fixed by ``seed`` and the shape."""
    gen = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()
