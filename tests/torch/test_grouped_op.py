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
from gemm_engine.torch.grouped import _column_major, _contiguous_grads  # noqa: E402


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
    assert _column_major(gb) and gb.shape == (2, 4, 3)
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


def test_the_public_op_differentiates_too():
    offsets = _ends([1, 2])
    a, b = leaf(3, 4), leaf(2, 4, 2, seed=1)
    engine = gemm_engine.torch.engine_handle(None)
    _check(lambda a, b: torch.ops.gemm_engine.grouped_mm(a, b, offsets, None, engine, None, ""), a, b)


@pytest.mark.parametrize("extra", [dict(bias=torch.zeros(2, dtype=torch.float64)), dict(activation="relu"),
                                   dict(alpha=2.0), dict(out=torch.empty(3, 2, dtype=torch.float64))])
def test_epilogue_terms_on_tensors_that_require_grad_are_refused(extra):
    a, b = leaf(3, 4), leaf(2, 4, 2, seed=1)
    with pytest.raises(ValueError, match="only the plain grouped product"):
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
