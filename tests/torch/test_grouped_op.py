"""torch.ops.gemm_engine.grouped_mm: the grouped product's gradient, computed by the engine
(gradcheck in float64, here on PoCL) for the contiguous, masked and k layouts, reached through
gemm_engine.grouped_matmul on tensors that require grad; masked padding never reaches a gradient;
epilogue terms on such tensors are refused; torch.compile traces the call and its backward."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
import gemm_engine.torch  # noqa: E402,F401
from float64_grads import float64_default_engine, leaf  # noqa: E402,F401  (an autouse fixture)
from gemm_engine.torch.autograd import column_major  # noqa: E402
from gemm_engine.torch.grouped import _contiguous_grads  # noqa: E402


def _ends(counts, dtype=torch.int32):
    return torch.tensor(np.cumsum(counts), dtype=dtype)


def _check(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("counts", [[2, 0, 3, 1], [6], [0, 0, 4]], ids=["ragged", "one", "empty_first"])
def test_contiguous(counts):
    offsets = _ends(counts, torch.int64)
    a, b = leaf(sum(counts), 5), leaf(len(counts), 5, 3, seed=1)
    _check(lambda a, b: gemm_engine.grouped_matmul(a, b, offsets=offsets), a, b)
    # b as a linear layer's weights are: (G, N, K) storage read as (G, K, N)
    w = leaf(len(counts), 3, 5, seed=2)
    _check(lambda a, w: gemm_engine.grouped_matmul(a, w.mT, offsets=offsets), a, w)


def test_contiguous_weight_gradient_keeps_the_weights_layout():
    offsets = _ends([2, 3])
    a, w = torch.randn(5, 4, dtype=torch.float64), torch.randn(2, 3, 4, dtype=torch.float64)
    gy = torch.randn(5, 3, dtype=torch.float64)
    _, gb = _contiguous_grads(a, w.mT, offsets, gy, (False, True), (0, None, ""))
    assert column_major(gb) and gb.shape == (2, 4, 3)
    want = torch.stack([a[:2].T @ gy[:2], a[2:].T @ gy[2:]])
    assert torch.allclose(gb, want)


def test_masked():
    counts = torch.tensor([2, 0, 4, 1], dtype=torch.int32)
    a, b = leaf(4, 4, 5), leaf(4, 5, 3, seed=1)
    _check(lambda a, b: gemm_engine.grouped_matmul(a, b, counts=counts), a, b)


def test_masked_padding_never_reaches_a_gradient():
    counts = torch.tensor([1, 3], dtype=torch.int32)
    a = torch.randn(2, 3, 4, dtype=torch.float64)
    a[0, 1:] = float("nan")               # rows past the counts: never read into a result
    a.requires_grad_()
    b = leaf(2, 4, 2, seed=3)
    gy = torch.randn(2, 3, 2, dtype=torch.float64)
    gemm_engine.grouped_matmul(a, b, counts=counts).backward(gy)
    assert torch.isfinite(b.grad).all() and torch.isfinite(a.grad).all()
    want_b = torch.stack([a[0, :1].detach().T @ gy[0, :1], a[1].detach().T @ gy[1]])
    assert torch.allclose(b.grad, want_b)
    assert (a.grad[0, 1:] == 0).all()      # those rows' results were zeros whatever they held
    assert torch.allclose(a.grad[1], gy[1] @ b[1].detach().T)


def test_k_layout():
    offsets = _ends([2, 0, 3, 2])           # over K = 7, an empty group among them
    a, b = leaf(3, 7), leaf(7, 2, seed=1)
    _check(lambda a, b: gemm_engine.grouped_matmul(a, b, offsets=offsets), a, b)


def _exact_scale(*shape, seed):
    """Row scales exact in float32: the kernels apply row_scale as float32 (gradcheck's finite
    differences of the scale itself would see that rounding, so its gradient is checked apart)."""
    return leaf(*shape, seed=seed).detach().float().double()


@pytest.mark.parametrize("per_group", [True, False])
def test_contiguous_bias_and_row_scale(per_group):
    counts = [2, 0, 3, 1]
    offsets = _ends(counts)
    a, b = leaf(6, 5), leaf(4, 5, 3, seed=1)
    bias, scale = leaf(*((4, 3) if per_group else (3,)), seed=2), _exact_scale(6, seed=3)
    _check(lambda a, b, bias: gemm_engine.grouped_matmul(a, b, offsets=offsets, bias=bias, row_scale=scale),
           a, b, bias)
    # the routing weight's gradient: each row's unscaled result against gy
    scale.requires_grad_()
    gy = torch.randn(6, 3, dtype=torch.float64)
    gemm_engine.grouped_matmul(a.detach(), b.detach(), offsets=offsets, bias=bias.detach(), row_scale=scale).backward(gy)
    group = np.repeat(np.arange(4), counts)
    unscaled = torch.stack([a[r].detach() @ b[g].detach() + (bias[g] if per_group else bias).detach()
                            for r, g in enumerate(group)])
    assert torch.allclose(scale.grad, (unscaled * gy).sum(-1))


def test_masked_bias_and_row_scale():
    counts = torch.tensor([2, 0, 4], dtype=torch.int32)
    a, b = leaf(3, 4, 5), leaf(3, 5, 2, seed=1)
    bias, scale = leaf(3, 2, seed=2), _exact_scale(3, 4, seed=3)
    _check(lambda a, b, bias: gemm_engine.grouped_matmul(a, b, counts=counts, bias=bias, row_scale=scale),
           a, b, bias)
    # a shared bias reaches only the rows below the counts
    shared = leaf(2, seed=4)
    _check(lambda shared: gemm_engine.grouped_matmul(a.detach(), b.detach(), counts=counts, bias=shared), shared)
    scale.requires_grad_()
    gy = torch.randn(3, 4, 2, dtype=torch.float64)
    gemm_engine.grouped_matmul(a.detach(), b.detach(), counts=counts, bias=bias.detach(), row_scale=scale).backward(gy)
    unscaled = a.detach() @ b.detach() + bias.detach()[:, None, :]
    live = (torch.arange(4)[None, :] < counts[:, None])
    assert torch.allclose(scale.grad, torch.where(live, (unscaled * gy).sum(-1), 0))


def test_the_public_op_differentiates_too():
    offsets = _ends([1, 2])
    a, b = leaf(3, 4), leaf(2, 4, 2, seed=1)
    engine = gemm_engine.torch.engine_handle(None)
    _check(lambda a, b: torch.ops.gemm_engine.grouped_mm(a, b, offsets, None, None, None, "", engine, None, ""), a, b)


@pytest.mark.parametrize("extra", [dict(bias=torch.zeros(3, dtype=torch.float64), bias_axis=0),
                                   dict(alpha=2.0),
                                   dict(out=torch.empty(3, 2, dtype=torch.float64)),
                                   dict(c=torch.zeros(3, 2, dtype=torch.float64))])
def test_epilogue_terms_on_tensors_that_require_grad_are_refused(extra):
    a, b = leaf(3, 4), leaf(2, 4, 2, seed=1)
    with pytest.raises(ValueError, match="no other epilogue term"):
        gemm_engine.grouped_matmul(a, b, offsets=_ends([1, 2]), **extra)
    # without grad they run as before
    with torch.no_grad():
        gemm_engine.grouped_matmul(a, b, offsets=_ends([1, 2]), **extra)


def test_torch_compile_traces_the_call_and_its_backward():
    offsets = _ends([2, 1, 3])
    a, b = leaf(6, 4), leaf(3, 4, 5, seed=1)
    fn = torch.compile(lambda a, b, o: gemm_engine.grouped_matmul(a, b, offsets=o), fullgraph=True, backend="aot_eager")
    y = fn(a, b, offsets)
    gy = torch.randn_like(y)
    ga, gb = torch.autograd.grad(y, (a, b), gy)
    y0 = gemm_engine.grouped_matmul(a, b, offsets=offsets)
    ga0, gb0 = torch.autograd.grad(y0, (a, b), gy)
    assert torch.allclose(y, y0) and torch.allclose(ga, ga0) and torch.allclose(gb, gb0)


def test_the_k_layout_takes_no_epilogue_terms_with_grad():
    a, b = leaf(3, 7), leaf(7, 2, seed=1)
    with pytest.raises(ValueError, match="contiguous and masked layouts"):
        gemm_engine.grouped_matmul(a, b, offsets=_ends([3, 4]), bias=torch.zeros(2, dtype=torch.float64))


def test_autocast_casts_the_operands_and_keeps_epilogue_calls_running():
    """Under autocast (its dtype for a, b and bias; the routing weights keep theirs) a call without
    grad runs every epilogue term as before, and one with grad goes through the op. (Before the
    engine's un-routed entry the op's own call routed again under autocast: a RecursionError.)"""
    x, w = torch.randn(6, 4), torch.randn(2, 4, 3)
    offsets, scale = _ends([2, 4]), torch.rand(6)
    want = gemm_engine.grouped_matmul(x, w, offsets=offsets, activation="relu", row_scale=scale)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = gemm_engine.grouped_matmul(x, w, offsets=offsets, activation="relu", row_scale=scale)
        xr = x.clone().requires_grad_()
        y = gemm_engine.grouped_matmul(xr, w, offsets=offsets, row_scale=scale)
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2)
    assert y.dtype == torch.bfloat16
    y.float().backward(torch.ones(6, 3))
    assert xr.grad.dtype == torch.float32 and torch.isfinite(xr.grad).all()


def test_the_list_layout_differentiates_pair_by_pair():
    """Lists of tensors that require grad: one product per pair, each with its gradient (the list
    layout's one launch returned results without any)."""
    xs, ws = [leaf(3, 4), leaf(2, 5, seed=1)], [leaf(4, 2, seed=2), leaf(5, 3, seed=3)]
    _check(lambda x0, x1, w0, w1: tuple(gemm_engine.grouped_matmul([x0, x1], [w0, w1], activation="relu", alpha=2.0)),
           *xs, *ws)
    with pytest.raises(ValueError, match="not bias"):
        gemm_engine.grouped_matmul(xs, ws, bias=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(TypeError, match="lists of 2-D arrays"):
        gemm_engine.grouped_matmul(xs, ws[:1])


@pytest.mark.parametrize("activation", [None, "swiglu"])
@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_quantized_experts_differentiate_in_x_bias_and_routing_weights(layout, activation):
    """Quantized experts (no tensor, so no op): x, a per-expert bias and the routing weights get
    their gradients (the experts dequantized for the backward's products), float32 against float64."""
    rng = np.random.default_rng(3)
    q = gemm_engine.quantize(rng.standard_normal((3, 64, 24)), "int4", 32, False)
    wd = torch.from_numpy(q.dequantize()).double()
    if layout == "contiguous":
        counts = [4, 0, 5]
        extents = dict(offsets=_ends(counts))
        group = torch.repeat_interleave(torch.arange(3), torch.tensor(counts))
        x, scale = torch.randn(9, 64), torch.rand(9)
    else:
        counts = torch.tensor([2, 0, 3], dtype=torch.int32)
        extents = dict(counts=counts)
        x, scale = torch.randn(3, 3, 64), torch.rand(3, 3)
    bias = torch.randn(3, 24)
    x, bias, scale = (t.requires_grad_() for t in (x, bias, scale))
    y = gemm_engine.grouped_matmul(x, q, bias=bias, row_scale=scale, activation=activation, **extents)
    gy = torch.randn_like(y)
    y.backward(gy)
    xd, bd, sd = (t.detach().double().requires_grad_() for t in (x, bias, scale))
    act = _interleaved if activation else (lambda z: z)
    if layout == "contiguous":
        ref = act(torch.einsum("mk,mkn->mn", xd, wd[group]) + bd[group]) * sd[:, None]
    else:
        live = (torch.arange(3)[None, :] < counts[:, None])[..., None]
        ref = torch.where(live, act(xd @ wd + bd[:, None, :]) * sd[..., None], 0)
    ref.backward(gy.double())
    for got, want in ((y, ref), (x.grad, xd.grad), (bias.grad, bd.grad), (scale.grad, sd.grad)):
        assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))
    with pytest.raises(ValueError, match="quantized experts take a column bias"):
        gemm_engine.grouped_matmul(x, q, activation="sigmoid", **extents)     # no torch formula here


# -- activations: elementwise and gated (an MoE up projection: SwiGLU per expert, routing weights) -------
def _interleaved(z):
    return torch.nn.functional.silu(z[..., 0::2]) * z[..., 1::2]


@pytest.mark.parametrize("activation", ["swiglu", "relu", "gelu_tanh"])
def test_contiguous_activations_with_bias_and_routing_weights(activation):
    counts = [2, 0, 3, 1]
    offsets = _ends(counts)
    a, b, bias = leaf(6, 5), leaf(4, 5, 4, seed=1), leaf(4, 4, seed=2)
    # kernels read routing weights as float32: these are float32 values (the next test takes their gradient)
    scale = torch.rand(6).double()
    _check(lambda a, b, bias: gemm_engine.grouped_matmul(a, b, offsets=offsets, bias=bias, row_scale=scale,
                                                         activation=activation), a, b, bias)


def test_swiglu_per_group_matches_torch_and_its_masked_padding_stays_out():
    counts = torch.tensor([2, 0, 3], dtype=torch.int32)
    a = torch.randn(3, 4, 5, dtype=torch.float64)
    a[0, 2:], a[2, 3:] = float("nan"), float("nan")            # padding rows: never read
    a.requires_grad_()
    b, bias = leaf(3, 5, 6, seed=1), leaf(3, 6, seed=2)
    scale = torch.rand(3, 4).double().requires_grad_()        # float32 values: kernels read them as such
    y = gemm_engine.grouped_matmul(a, b, counts=counts, bias=bias, row_scale=scale, activation="swiglu")
    assert y.shape == (3, 4, 3)
    gy = torch.randn_like(y)
    y.backward(gy)
    ad, bd, biasd, sd = (t.detach().nan_to_num().clone().requires_grad_() for t in (a, b, bias, scale))
    live = (torch.arange(4)[None, :] < counts[:, None])[..., None]
    ref = torch.where(live, _interleaved(ad @ bd + biasd[:, None, :]) * sd[..., None], 0)
    ref.backward(gy)
    for got, want in ((y, ref), (a.grad, ad.grad), (b.grad, bd.grad), (bias.grad, biasd.grad), (scale.grad, sd.grad)):
        assert torch.isfinite(got).all() and torch.allclose(got, want, atol=1e-10)


def test_swiglu_in_the_k_layout_and_under_torch_compile():
    offsets = _ends([3, 4])
    a, b = leaf(3, 7), leaf(7, 4, seed=1)
    _check(lambda a, b: gemm_engine.grouped_matmul(a, b, offsets=offsets, activation="swiglu"), a, b)
    x, w, scale = leaf(6, 4), leaf(3, 4, 6, seed=2), torch.rand(6).double().requires_grad_()
    rows = _ends([2, 1, 3])
    fn = torch.compile(lambda x, w, s, o: gemm_engine.grouped_matmul(x, w, offsets=o, row_scale=s, activation="swiglu"),
                       fullgraph=True, backend="aot_eager")
    y = fn(x, w, scale, rows)
    gy = torch.randn_like(y)
    grads = torch.autograd.grad(y, (x, w, scale), gy)
    y0 = gemm_engine.grouped_matmul(x, w, offsets=rows, row_scale=scale, activation="swiglu")
    want = torch.autograd.grad(y0, (x, w, scale), gy)
    assert y.shape == (6, 3) and torch.allclose(y, y0)
    assert all(torch.allclose(g, g0) for g, g0 in zip(grads, want))


def test_an_activation_without_a_torch_gradient_is_refused_before_it_runs():
    a, b = leaf(3, 4), leaf(2, 4, 2, seed=1)
    with pytest.raises(ValueError, match="has no gradient in a grouped product"):
        gemm_engine.grouped_matmul(a, b, offsets=_ends([1, 2]), activation="sigmoid")


@pytest.mark.parametrize("bias_shape", [(3, 4), (4,)], ids=["per_group", "shared"])
def test_routing_weight_gradient_without_recomputing_the_product(bias_shape):
    """grow_scale = a . (gy b^T) + bias . gy per row (grouped.py `_scale_grad`), rows past the last
    offset zero, against float64 autograd of the product written out."""
    counts = [2, 0, 3]
    offsets = _ends(counts)                              # 5 of 7 rows grouped: the last two held by none
    a, b, bias = leaf(7, 5), leaf(3, 5, 4, seed=1), leaf(*bias_shape, seed=2)
    scale = torch.rand(7).double().requires_grad_()
    y = gemm_engine.grouped_matmul(a, b, offsets=offsets, bias=bias, row_scale=scale)
    gy = torch.randn_like(y)
    y.backward(gy)
    ad, bd, biasd, sd = (t.detach().clone().requires_grad_() for t in (a, b, bias, scale))
    group = torch.repeat_interleave(torch.arange(3), torch.tensor(counts))
    rows = (torch.einsum("mk,mkn->mn", ad[:5], bd[group]) + (biasd[group] if biasd.dim() == 2 else biasd)) * sd[:5, None]
    rows.backward(gy[:5])
    assert torch.allclose(y[:5], rows)
    for got, want in ((a.grad, ad.grad), (b.grad, bd.grad), (bias.grad, biasd.grad), (scale.grad, sd.grad)):
        assert torch.allclose(got, torch.nan_to_num(want), atol=1e-12)
    assert (scale.grad[5:] == 0).all() and (a.grad[5:] == 0).all()
