"""Backward through gemm_engine.matmul, computed by the engine: torch.autograd.gradcheck in float64
(on PoCL here) for plain, batched, broadcast and vector products, every epilogue term, every
activation (gated ones too) and mul; gradients keep the operands' layouts; what has no gradient
says so."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
import gemm_engine.torch  # noqa: E402,F401
from float64_grads import float64_default_engine, leaf  # noqa: E402,F401  (an autouse fixture)
from gemm_engine.epilogue.activations import ACTIVATIONS  # noqa: E402

ELEMENTWISE = sorted(name for name, cls in ACTIVATIONS.items() if cls.arity == 1)
GATED = sorted(name for name, cls in ACTIVATIONS.items() if cls.arity == 2)


def _check(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("shapes", [((4, 5), (5, 3)), ((2, 3, 4, 5), (5, 3)), ((3, 1, 4, 5), (2, 5, 3)),
                                    ((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,))],
                         ids=["2d", "batched_b_broadcast", "both_broadcast", "vector_a", "vector_b", "dot"])
def test_plain_products(shapes):
    a, b = leaf(*shapes[0]), leaf(*shapes[1], seed=1)
    _check(gemm_engine.matmul, a, b)


def test_every_epilogue_term():
    a, b, c, bias = leaf(2, 4, 5), leaf(5, 3, seed=1), leaf(4, 1, seed=2), leaf(3, seed=3)
    _check(lambda a, b, c, bias: gemm_engine.matmul(a, b, alpha=-1.5, beta=0.5, c=c, bias=bias), a, b, c, bias)
    rows = leaf(4, seed=4)
    _check(lambda a, b, rows: gemm_engine.matmul(a, b, bias=rows, bias_axis=0, alpha=2.0), a, b, rows)


@pytest.mark.parametrize("name", ELEMENTWISE + GATED)
def test_every_activation(name):
    a, b, bias = leaf(3, 5), leaf(5, 4, seed=1), leaf(4, seed=2)
    _check(lambda a, b, bias: gemm_engine.matmul(a, b, bias=bias, activation=name), a, b, bias)


def test_mul_and_an_activation_batched():
    a, b, mul = leaf(2, 3, 5), leaf(5, 4, seed=1), leaf(3, 2, seed=2)
    _check(lambda a, b, mul: gemm_engine.matmul(a, b, activation="swiglu", mul=mul), a, b, mul)
    mul = leaf(3, 4, seed=3)
    _check(lambda a, b, mul: gemm_engine.matmul(a, b, activation="tanh", mul=mul, alpha=0.5), a, b, mul)


def test_gradients_match_torch_and_keep_the_weights_layout():
    """A linear layer's product x @ W.T: the weight's gradient comes back row-major as W."""
    x, w, bias = leaf(6, 5), leaf(4, 5, seed=1), leaf(4, seed=2)
    y = gemm_engine.matmul(x, w.mT, bias=bias, activation="gelu")
    y.backward(torch.ones_like(y))
    grads = [t.grad.clone() for t in (x, w, bias)]
    for t in (x, w, bias):
        t.grad = None
    torch.nn.functional.gelu(x @ w.mT + bias).backward(torch.ones_like(y))
    for got, t in zip(grads, (x, w, bias)):
        assert torch.allclose(got, t.grad, rtol=1e-12, atol=1e-12)
    assert grads[1].is_contiguous()


def test_what_has_no_gradient_says_so():
    class NoSlope(gemm_engine.Activation):
        name = "test_no_slope"

        def render(self, x, m):
            return f"({x} * {x})"

    a, b = leaf(3, 5), leaf(5, 4, seed=1)
    y = gemm_engine.matmul(a, b, activation=NoSlope())
    with pytest.raises(ValueError, match="'test_no_slope' defines no `derivative`"):
        y.sum().backward()
    with pytest.raises(RuntimeError, match="out= is not supported"):
        gemm_engine.matmul(a, b, out=torch.empty(3, 4, dtype=torch.float64))
    y = gemm_engine.matmul(a, b, activation="silu")
    (ga,) = torch.autograd.grad(y.sum(), a, create_graph=True)
    with pytest.raises(RuntimeError, match="no double backward"):
        ga.sum().backward()


def test_compiled_backward_equals_eager():
    x, w = leaf(5, 6), leaf(6, 4, seed=1)

    def loss(x, w):
        return gemm_engine.matmul(x, w, activation="swiglu").square().sum()

    eager = torch.autograd.grad(loss(x, w), (x, w))
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    for got, want in zip(torch.autograd.grad(compiled(x, w), (x, w)), eager):
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)


def _engine_ops(graph) -> list[str]:
    return [str(node.target) for node in graph.graph.nodes if "gemm_engine" in str(node.target)]


def test_compiled_training_puts_the_op_forward_and_its_gradients_backward():
    """The autograd.Function around the op (autograd.py) under torch.compile: one graph with dynamic
    shapes (no recompile for new row counts), the op alone in AOTAutograd's forward graph, the
    engine's gradient products in its backward graph, gradients equal to eager ones."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    graphs = {"forward": [], "backward": []}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind].append(_engine_ops(gm))
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    w, bias = leaf(6, 4, seed=1), leaf(4, seed=2)

    def loss(x, w, bias):
        return gemm_engine.matmul(x, w, bias=bias, activation="gelu").square().sum()

    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    first = leaf(5, 6)
    torch._dynamo.mark_dynamic(first, 0)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for x in (first, leaf(9, 6, seed=3), leaf(2, 6, seed=4)):
            got = torch.autograd.grad(compiled(x, w, bias), (x, w, bias))
            want = torch.autograd.grad(loss(x, w, bias), (x, w, bias))
            for g, e in zip(got, want):
                assert torch.allclose(g, e, rtol=1e-12, atol=1e-12)
    # The twins without autograd (ops.py `kernel_name`): no autograd frame in the compiled calls.
    assert graphs["forward"] == [["gemm_engine._matmul_fused.default"]]
    # gz = f'(z) * g by the fused derivative epilogue, then dx = gz @ w^T and dw = x^T @ gz.
    assert graphs["backward"] == [["gemm_engine._matmul_fused.default", "gemm_engine._matmul.default",
                                   "gemm_engine._matmul.default"]]


def test_the_public_ops_called_directly_have_gradients():
    # torch.ops.gemm_engine.* by hand: the same Functions through the ops' autograd kernels.
    from gemm_engine.torch.ops import activation_key
    a, b, bias = leaf(3, 4), leaf(4, 2, seed=1), leaf(2, seed=2)
    plain = lambda x, y: torch.ops.gemm_engine.matmul(x, y, 0, None, "default")          # noqa: E731
    assert torch.autograd.gradcheck(plain, (a, b), eps=1e-6, atol=1e-7, rtol=1e-5)
    fused = lambda x, y, z: torch.ops.gemm_engine.matmul_fused(                          # noqa: E731
        x, y, None, z, None, 2.0, 0.0, -1, activation_key("gelu"), None, "same_kind", 0, None, "default")
    assert torch.autograd.gradcheck(fused, (a, b, bias), eps=1e-6, atol=1e-7, rtol=1e-5)
    scales = torch.ones(3, 1, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="scaled_matmul: a scaled .* has no gradient"):
        torch.ops.gemm_engine.scaled_matmul(a, b, *scales, 1.0, None, -1, "", None, "same_kind", 0, None, "default")


def test_the_plain_product_has_a_second_derivative():
    a, b = leaf(3, 4), leaf(4, 2, seed=1)
    assert torch.autograd.gradgradcheck(gemm_engine.matmul, (a, b), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_autocast_casts_before_the_function_saves():
    """Under autocast the operands are cast before the autograd.Function (autograd.py `call`): it
    saves and multiplies the bfloat16 ones, as torch's mm does, and the casts pass the gradients
    back to the float32 leaves."""
    gen = torch.Generator().manual_seed(6)
    a = torch.randn(6, 8, generator=gen).requires_grad_()
    b = torch.randn(8, 5, generator=gen).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = gemm_engine.matmul(a, b)
        ref_a, ref_b = (t.detach().clone().requires_grad_() for t in (a, b))
        want = ref_a @ ref_b
    assert y.dtype == want.dtype == torch.bfloat16
    assert {f.name() for f, _ in y.grad_fn.next_functions} == {"ToCopyBackward0"}
    g = torch.randn(6, 5, generator=gen).to(torch.bfloat16)
    y.backward(g)
    want.backward(g)
    for got, ref in ((a, ref_a), (b, ref_b)):
        assert got.grad.dtype == torch.float32
        assert torch.allclose(got.grad, ref.grad, rtol=2e-2, atol=2e-2)
