"""distributed/api.py: the public functions' argument checks (before any collective), and in a one-rank
gloo group the dims, ``return_gathered``, shard sizes and gradients (an engine stand-in computing
with torch: the plumbing under test, not the engine's kernels)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gemm_engine.distributed.api import all_gather_matmul, matmul_reduce_scatter  # noqa: E402
from single_gloo import TorchEngine, gloo_world_of_one  # noqa: E402,F401

F64 = dict(dtype=torch.float64)


@pytest.mark.parametrize("fn", [all_gather_matmul, matmul_reduce_scatter])
@pytest.mark.parametrize("x, w, kw, match", [
    (torch.ones(4, 3), torch.ones(3), {}, "w must be 2-D"),
    (torch.ones(3), torch.ones(3, 2), {}, "at least 2 dims"),
    (torch.ones(4, 5), torch.ones(3, 2), {}, r"last dim \(5\) differs"),
    (torch.ones(2, 4, 3), torch.ones(3, 2), {"dim": 2}, "must name one of x's dims"),
    (torch.ones(2, 4, 3), torch.ones(3, 2), {"dim": True}, "must name one of x's dims"),
    (torch.ones(4, 3), torch.ones(3, 2), {"strategy": "ring"}, "strategy"),
])
def test_argument_checks_name_the_argument(fn, x, w, kw, match):
    kw = dict(kw)
    if "dim" in kw:
        kw["gather_dim" if fn is all_gather_matmul else "scatter_dim"] = kw.pop("dim")
    with pytest.raises(ValueError, match=match):
        fn(x, w, **kw)


@pytest.mark.parametrize("bias, match", [(torch.ones(3), r"bias must be a tensor of shape \(2,\)"),
                                         (torch.ones(1), r"shape \(2,\)"), (2.0, "got float")])
def test_matmul_reduce_scatter_checks_the_bias(bias, match):
    with pytest.raises(ValueError, match=match):
        matmul_reduce_scatter(torch.ones(4, 3), torch.ones(3, 2), bias=bias)


def test_non_tensors_refused():
    with pytest.raises(TypeError, match="torch tensors"):
        all_gather_matmul([[1.0]], torch.ones(1, 1))


def test_all_gather_matmul_dims_and_gathered(gloo_world_of_one):
    x, w = torch.randn(2, 5, 4, **F64), torch.randn(4, 3, **F64)
    y, full = all_gather_matmul(x, w, gather_dim=1, engine=TorchEngine(), return_gathered=True)
    torch.testing.assert_close(y, x @ w)
    assert torch.equal(full, x)


def test_all_gather_matmul_shard_size_must_match(gloo_world_of_one):
    with pytest.raises(ValueError, match=r"shard_sizes\[0\] = 3"):
        all_gather_matmul(torch.ones(4, 2), torch.ones(2, 2), shard_sizes=[3], engine=TorchEngine())


def test_matmul_reduce_scatter_sum_check(gloo_world_of_one):
    with pytest.raises(ValueError, match="sum to 3"):
        matmul_reduce_scatter(torch.ones(4, 2), torch.ones(2, 2), shard_sizes=[3], engine=TorchEngine())


@pytest.mark.parametrize("fn", [all_gather_matmul, matmul_reduce_scatter])
def test_gradients_match_plain_matmul(gloo_world_of_one, fn):
    x = torch.randn(3, 4, 5, **F64, requires_grad=True)
    w = torch.randn(5, 2, **F64, requires_grad=True)
    y = fn(x, w, None, 1, engine=TorchEngine())
    torch.testing.assert_close(y, x @ w)
    g = torch.randn_like(y)
    y.backward(g)
    gx, gw = torch.autograd.grad(x @ w, (x, w), g)
    torch.testing.assert_close(x.grad, gx)
    torch.testing.assert_close(w.grad, gw)


@pytest.mark.parametrize("fn", [all_gather_matmul, matmul_reduce_scatter])
@pytest.mark.parametrize("grad", ["x", "w", "none", "no_grad"])
def test_autograd_records_only_calls_it_must(gloo_world_of_one, fn, grad):
    # Calls no gradient flows through skip autograd.Function (its host cost); the same values, and a
    # grad_fn exactly where an input requires one, whichever input it is.
    x = torch.randn(6, 5, **F64, requires_grad=grad == "x")
    w = torch.randn(5, 2, **F64, requires_grad=grad == "w")
    with torch.set_grad_enabled(grad != "no_grad"):
        y = fn(x, w, engine=TorchEngine())
    torch.testing.assert_close(y, (x @ w).detach())
    assert (y.grad_fn is not None) == (grad in ("x", "w"))
    if grad in ("x", "w"):
        y.sum().backward()
        src = x if grad == "x" else w
        torch.testing.assert_close(src.grad, torch.autograd.grad((x @ w).sum(), src)[0])


class _TypeRecorder(TorchEngine):
    """The stand-in, noting the types of what it is given (the engine's fast path takes plain tensors)."""

    def __init__(self):
        super().__init__()
        self.types = set()

    def compute(self, a, b, out=None, bias=None):
        self.types |= {type(t) for t in (a, b, bias) if t is not None}
        return super().compute(a, b, out=out, bias=bias)


@pytest.mark.parametrize("fn", [all_gather_matmul, matmul_reduce_scatter])
def test_frozen_parameters_reach_the_engine_as_plain_tensors(gloo_world_of_one, fn):
    """A frozen layer's weight and bias (``nn.Parameter`` without gradients) under grad mode: no
    gradient to record, and the engine is given plain tensors, the values unchanged."""
    w = torch.nn.Parameter(torch.randn(3, 2, **F64), requires_grad=False)
    bias = torch.nn.Parameter(torch.randn(2, **F64), requires_grad=False)
    x = torch.randn(4, 3, **F64)
    engine = _TypeRecorder()
    with torch.enable_grad():
        y = fn(x, w, bias=bias, engine=engine)
    assert engine.types == {torch.Tensor} and not y.requires_grad
    torch.testing.assert_close(y, x @ w + bias)
