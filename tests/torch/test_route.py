"""torch/route.py: calls that need torch's machinery go through the registered ops -- with gradients
(checked against torch's own float64 product), numbers for c / bias / mul as tensors of the product's
dtype (numpy's weak rule, one table), number scales folded into alpha -- and its refusals by name.
Runs on CPU tensors through the OpenCL engine."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine.torch  # noqa: E402,F401
from gemm_engine.torch import route  # noqa: E402


@pytest.fixture
def engine(opencl_engine, monkeypatch):
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", opencl_engine)
    return opencl_engine


def _call(engine, a, b, **kw):
    options = dict(out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None, out_dtype=None,
                   casting="same_kind", algorithm=None, precision=None, tune=False, scale_a=None, scale_b=None,
                   mul=None)
    options.update(kw)
    return route.routed(engine, a, b, **options)


def test_the_weak_dtype_table():
    assert route._WEAK[torch.float16, torch.float16] == torch.float16
    assert route._WEAK[torch.float32, torch.float64] == torch.float64
    assert route._WEAK[torch.int8, torch.int8] == torch.float64          # an int32 product: numbers are float64
    assert route._WEAK[torch.bfloat16, torch.float32] == torch.float32


def test_gradients_match_torch(engine):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(5, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)
    out = _call(engine, a, b, bias=bias, alpha=0.5, activation="relu", c=2.0)
    ref_a, ref_b, ref_bias = (x.detach().clone().requires_grad_() for x in (a, b, bias))
    ref = torch.relu(0.5 * (ref_a @ ref_b) + 2.0 + ref_bias)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    out.backward(g)
    ref.backward(g)
    for got, want in ((a, ref_a), (b, ref_b), (bias, ref_bias)):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-12, atol=1e-12)


def test_number_scales_fold_into_alpha(engine):
    a, b = torch.ones(3, 4), torch.ones(4, 2)
    got = _call(engine, a, b, scale_a=2.0, scale_b=3.0, alpha=0.5)
    torch.testing.assert_close(got, torch.full((3, 2), 4 * 3.0))


def test_plain_calls_and_out(engine):
    a, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(6, 5, dtype=torch.float64)
    torch.testing.assert_close(_call(engine, a, b), a @ b)
    out = torch.empty(4, 5, dtype=torch.float64)
    assert _call(engine, a, b, out=out) is out
    torch.testing.assert_close(out, a @ b)


def test_refusals(engine):
    a = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out= is not supported on tensors that require grad"):
        _call(engine, a, b, out=torch.empty(3, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="the algorithm must be a registered name"):
        _call(engine, a, b, algorithm=object())
    with pytest.raises(ValueError, match="bias_axis must be"):
        _call(engine, a, b, bias_axis=True)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        _call(engine, a, b, alpha=True)
    with pytest.raises(RuntimeError, match="has no gradient"):
        _call(engine, a, b, scale_a=torch.ones(3))
    with pytest.raises(ValueError, match="c and mul are not supported with scales"):
        _call(engine, a.detach(), b, scale_a=2.0, c=1.0)
