"""Shared by the torch tests that run on the GPU: the CUDA engine as the default engine (a skip where
torch sees no CUDA device), Dynamo's caches reset, imported as a fixture."""
from __future__ import annotations

import pytest

from conftest import get_engine

torch = pytest.importorskip("torch", reason="torch is not installed here")


@pytest.fixture
def cuda_engine(monkeypatch):
    engine = get_engine("cuda")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", engine)
    torch._dynamo.reset()
    return engine
