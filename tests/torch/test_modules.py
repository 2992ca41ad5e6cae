"""Linear, replace_linear and SwiGLU: nn.Linear's parameters, initialization and state_dict keys,
the same outputs and gradients as torch's modules, the fused gate/up projection against two
nn.Linear, warmup of a model's layers."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
from gemm_engine.torch import Linear, SwiGLU, replace_linear  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


@pytest.fixture(autouse=True)
def _opencl_default(opencl_engine, monkeypatch):
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", opencl_engine)


def test_linear_is_nn_linear_with_a_fused_activation():
    torch.manual_seed(0)
    ours = Linear(12, 7, activation="gelu")
    torch.manual_seed(0)
    theirs = nn.Linear(12, 7)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "bias"]
    assert torch.equal(ours.weight, theirs.weight) and torch.equal(ours.bias, theirs.bias)
    x = torch.randn(3, 5, 12, requires_grad=True)
    y = ours(x)
    want = F.gelu(theirs(x))
    assert y.shape == (3, 5, 7) and torch.allclose(y, want, rtol=1e-5, atol=1e-6)
    y.square().sum().backward()
    got = (x.grad.clone(), ours.weight.grad.clone(), ours.bias.grad.clone())
    x.grad = None
    want.square().sum().backward()
    for g, w in zip(got, (x.grad, theirs.weight.grad, theirs.bias.grad)):
        assert torch.allclose(g, w, rtol=1e-4, atol=1e-5)
    assert "activation='gelu'" in repr(ours)
    with pytest.raises(ValueError, match="SwiGLU"):
        Linear(4, 4, activation="swiglu")


def test_replace_linear_swaps_in_place_and_shares_parameters():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4, bias=False)))
    params = [id(p) for p in model.parameters()]
    x = torch.randn(5, 8)
    want = model(x)
    assert replace_linear(model) is model
    assert isinstance(model[0], Linear) and isinstance(model[2][0], Linear)
    assert [id(p) for p in model.parameters()] == params
    assert torch.allclose(model(x), want, rtol=1e-5, atol=1e-6)
    assert isinstance(replace_linear(nn.Linear(3, 2)), Linear)


def test_swiglu_is_two_linears_in_one_gemm():
    torch.manual_seed(1)
    gate, up = nn.Linear(10, 6), nn.Linear(10, 6)
    fused = SwiGLU.from_linears(gate, up)
    g, u = fused.gate_up()
    assert torch.equal(g, gate.weight) and torch.equal(u, up.weight) and fused.weight.shape == (12, 10)
    x = torch.randn(2, 3, 10, requires_grad=True)
    y = fused(x)
    want = F.silu(gate(x)) * up(x)
    assert y.shape == (2, 3, 6) and torch.allclose(y, want, rtol=1e-5, atol=1e-6)
    y.sum().backward()
    gx, gw = x.grad.clone(), fused.weight.grad
    x.grad = None
    want.sum().backward()
    assert torch.allclose(gx, x.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(gw[0::2], gate.weight.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(gw[1::2], up.weight.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(fused.bias.grad[0::2], gate.bias.grad, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="gated"):
        SwiGLU(4, 4, activation="silu")


@pytest.mark.parametrize("activation, gate", [("swiglu", F.silu), ("geglu", F.gelu), ("reglu", F.relu)])
def test_swiglu_fuses_without_grad_and_keeps_its_products_for_a_backward(activation, gate, monkeypatch):
    import gemm_engine.torch.gated as gated
    import gemm_engine.torch.modules as modules
    torch.manual_seed(2)
    layer = SwiGLU(10, 6, bias=True, activation=activation).double()
    x = torch.randn(2, 4, 10, dtype=torch.float64, requires_grad=True)
    w, b = layer.weight.detach().clone().requires_grad_(), layer.bias.detach().clone().requires_grad_()
    z = x @ w.T + b
    want = gate(z[..., 0::2]) * z[..., 1::2]
    want_grads = torch.autograd.grad(want.square().sum(), (x, w, b))
    calls = []
    for module in (modules, gated):
        real = module.matmul
        monkeypatch.setattr(module, "matmul", lambda a, b, *args, real=real, **kw:
                            calls.append((tuple(a.shape), tuple(b.shape), kw.get("activation"))) or real(a, b, *args, **kw))
    with torch.no_grad():                       # inference: one GEMM, the gate in its epilogue
        assert torch.allclose(layer(x), want, rtol=1e-12, atol=1e-12)
    assert calls == [((8, 10), (10, 12), activation)]
    # training: one batched GEMM writing the gate's and the up products as contiguous halves,
    # gated by torch's ops (gated.py)
    calls.clear()
    y = layer(x)
    assert calls == [((8, 10), (2, 10, 6), None)] and torch.allclose(y, want, rtol=1e-12, atol=1e-12)
    got = torch.autograd.grad(y.square().sum(), (x, layer.weight, layer.bias))
    # dx: two GEMMs, the second adding the first as its c; dW: two GEMMs into its interleaved rows
    assert calls[1:] == [((8, 6), (6, 10), None), ((8, 6), (6, 10), None), ((6, 8), (8, 10), None),
                         ((6, 8), (8, 10), None)]
    for g, e in zip(got, want_grads):
        assert torch.allclose(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("activation", ["swiglu", "geglu", "reglu"])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_projection_passes_gradcheck(activation, bias):
    from gemm_engine.torch.gated import GatedProjection
    torch.manual_seed(3)
    x = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, 7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(8, dtype=torch.float64, requires_grad=True) if bias else None
    assert torch.autograd.gradcheck(lambda x, w, b: GatedProjection.apply(x, w, b, activation), (x, w, b))
    # only x's gradient wanted: the weight's GEMM is not run
    w.requires_grad_(False)
    (gx,) = torch.autograd.grad(GatedProjection.apply(x, w, None, activation).sum(), (x,))
    assert gx.shape == x.shape


def test_warmup_of_a_model_compiles_what_its_training_step_runs(opencl_engine):
    model = replace_linear(nn.Sequential(nn.Linear(24, 40, bias=False), nn.GELU(), nn.Linear(40, 24)))
    model.append(SwiGLU(24, 8))
    report = gemm_engine.warmup(model, tokens=(6,), training=True, engine=opencl_engine)
    assert report.problems >= 3 * 3 - 1 and not report.refused, report   # two coincide on host layouts
    compiled = []
    real = opencl_engine.runtime._compile
    opencl_engine.runtime._compile = lambda source, name: compiled.append(name) or real(source, name)
    try:
        model(torch.randn(6, 24)).sum().backward()
    finally:
        opencl_engine.runtime._compile = real
    assert compiled == [], "the training step compiled kernels warmup had not"


def test_swiglu_training_traces_whole_under_torch_compile():
    """The training path's autograd.Function (gated.py) under Dynamo and AOTAutograd, no graph break."""
    torch.manual_seed(4)
    layer = SwiGLU(16, 8, bias=True)
    x = torch.randn(2, 5, 16, requires_grad=True)

    def step(x):
        return layer(x).square().sum()

    want = step(x)
    want_grads = torch.autograd.grad(want, (x, layer.weight, layer.bias))
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(x)
    assert torch.allclose(got, want, rtol=1e-5)
    for g, e in zip(torch.autograd.grad(got, (x, layer.weight, layer.bias)), want_grads):
        assert torch.allclose(g, e, rtol=1e-4, atol=1e-6)


def test_gated_projection_refuses_a_second_derivative_by_name():
    """create_graph through the training path: an error (its backward is once differentiable), not
    a wrong second derivative."""
    from gemm_engine.torch.gated import GatedProjection
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    (gx,) = torch.autograd.grad(GatedProjection.apply(x, w, None, "swiglu").sum(), (x,), create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        gx.sum().backward()
