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


@pytest.mark.cuda
@pytest.mark.parametrize("with_c", [False, True], ids=["out", "out+c"])
def test_repeated_calls_into_a_torch_out_skip_the_general_path_and_write_it(monkeypatch, with_c):
    """``out=`` a torch CUDA tensor (a row block of a larger one: an offset into its storage) takes
    the fast path once planned, writes every element of it in place and nothing beside it."""
    torch = pytest.importorskip("torch")
    engine = get_engine("cuda")
    whole = torch.full((50, 16), float("nan"), device="cuda")
    out = whole[5:45]
    c = torch.randn(40, 16, device="cuda")
    options = dict(c=c, beta=1.0) if with_c else {}

    def check():
        a, b = torch.randn(40, 24, device="cuda"), torch.randn(24, 16, device="cuda")
        out.fill_(float("nan"))
        got = engine.compute(a, b, out=out, **options)
        want = a.double() @ b.double() + (c.double() if with_c else 0)
        assert got is out and rel_error(out.cpu().numpy(), want.cpu().numpy()) < 2e-5
        assert torch.isnan(whole[:5]).all() and torch.isnan(whole[45:]).all()
    check()
    check()
    _general_path_forbidden(monkeypatch)
    check()
    check()


@pytest.mark.cuda
@pytest.mark.parametrize("overlap", ["whole", "partial"])
def test_a_torch_out_overlapping_an_input_takes_the_general_path(overlap):
    """numpy's rule: as if the inputs were copied first, also on the calls after the first."""
    torch = pytest.importorskip("torch")
    engine = get_engine("cuda")
    b = torch.randn(16, 16, device="cuda")
    for _ in range(3):
        whole = torch.randn(24, 16, device="cuda")
        x, out = (whole[:16], whole[:16]) if overlap == "whole" else (whole[:16], whole[5:21])
        want = x.double() @ b.double()
        engine.compute(x, b, out=out)
        assert rel_error(out.cpu().numpy(), want.cpu().numpy()) < 2e-5


# -- a quantized weight (FastPath.quantized) -------------------------------------------------------------
def _quantized_check(engine, rng, q, m, to_device, to_host, **options):
    x = random(rng, (m, q.shape[0]), "float32")
    want = x.astype(np.float64) @ q.dequantize().astype(np.float64)
    if "bias" in options:
        want = want + np.asarray(to_host(options["bias"]), np.float64)
    got = to_host(engine.quantized_matmul(to_device(x), q, **options))
    assert rel_error(got, want) < 2e-5


@pytest.mark.parametrize("fmt, m", [("int4", 3), ("int8", 17), ("fp8_e4m3", 64)])
def test_repeated_quantized_calls_on_device_arrays_skip_the_general_path(engine, rng, monkeypatch, fmt, m):
    import gc

    import gemm_engine
    rt = engine.runtime
    weights = [gemm_engine.quantize(rng.standard_normal((72, 40)), fmt, None if fmt != "int4" else 32)
               for _ in range(2)]
    bias = rt.to_device(random(rng, (40,), "float32"))
    for q in weights:                              # plans each weight's call
        _quantized_check(engine, rng, q, m, rt.to_device, rt.to_host, bias=bias)
    with monkeypatch.context() as patched:
        _general_path_forbidden(patched)
        for q in weights + weights[::-1]:          # each weight its own plan: the key names it
            _quantized_check(engine, rng, q, m, rt.to_device, rt.to_host, bias=bias)
    # A weight that died leaves its plan unreachable: a new weight of the same format and shape (which
    # may get the dead one's id) is planned again, and right.
    del weights
    gc.collect()
    fresh = gemm_engine.quantize(rng.standard_normal((72, 40)), fmt, None if fmt != "int4" else 32)
    for _ in range(2):
        _quantized_check(engine, rng, fresh, m, rt.to_device, rt.to_host, bias=bias)


@pytest.mark.cuda
def test_repeated_quantized_calls_on_torch_cuda_tensors_skip_the_general_path(rng, monkeypatch):
    torch = pytest.importorskip("torch")
    import gemm_engine
    engine = get_engine("cuda")
    to_device = lambda x: torch.from_numpy(x).cuda()                   # noqa: E731
    to_host = lambda x: x.cpu().numpy()                                 # noqa: E731
    for m in (1, 16, 300):                          # the decode kernels and the dequantize-first pass
        q = gemm_engine.quantize(rng.standard_normal((256, 136)), "int4", 64)
        for _ in range(2):
            _quantized_check(engine, rng, q, m, to_device, to_host)
        with monkeypatch.context() as patched:
            _general_path_forbidden(patched)
            for _ in range(2):
                _quantized_check(engine, rng, q, m, to_device, to_host)
