"""The fast paths: a repeated call on device arrays (the runtime's own, or torch CUDA tensors) skips
every step of the general path, and its results stay right when the inputs change."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine.engine as engine_module
from conftest import get_engine
from helpers import random, reference, rel_error


def _general_path_forbidden(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the repeated call took the general path")
    monkeypatch.setattr(engine_module, "import_call", refuse)


def test_repeated_calls_on_device_arrays_skip_the_general_path(engine, rng, monkeypatch):
    rt = engine.runtime
    a, b = random(rng, (40, 24), "float32"), random(rng, (24, 16), "float32")
    engine.matmul(rt.to_device(a), rt.to_device(b))        # plans the call
    _general_path_forbidden(monkeypatch)
    for _ in range(2):
        a, b = random(rng, (40, 24), "float32"), random(rng, (24, 16), "float32")
        assert rel_error(rt.to_host(engine.matmul(rt.to_device(a), rt.to_device(b))), reference(a, b)) < 2e-5


@pytest.mark.cuda
@pytest.mark.parametrize("fused", [False, True], ids=["plain", "bias+relu"])
def test_repeated_calls_on_torch_cuda_tensors_skip_the_general_path(rng, monkeypatch, fused):
    torch = pytest.importorskip("torch")
    engine = get_engine("cuda")
    bias = torch.randn(16, device="cuda")
    options = dict(bias=bias, activation="relu") if fused else {}

    def check():
        a, b = torch.randn(40, 24, device="cuda"), torch.randn(24, 16, device="cuda")
        want = torch.relu(a.double() @ b.double() + bias.double()) if fused else a.double() @ b.double()
        got = engine.matmul(a, b, **options)
        assert type(got) is torch.Tensor and rel_error(got.cpu().numpy(), want.cpu().numpy()) < 2e-5
    check()                                   # torch's type is known from here on
    check()                                   # plans the call under its key
    _general_path_forbidden(monkeypatch)
    check()
    check()
