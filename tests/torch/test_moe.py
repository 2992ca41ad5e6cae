"""gemm_engine.torch.MoE / Experts: a mixture-of-experts SwiGLU layer on grouped products, against a
float64 loop over tokens and experts (here on PoCL): the output, every gradient (tokens, router,
both projections), empty experts, Mixtral's weights interleaved, and torch.compile (fullgraph)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine.torch  # noqa: E402,F401
from float64_grads import float64_default_engine  # noqa: E402,F401  (an autouse fixture)
from gemm_engine.torch import MoE, Experts  # noqa: E402
from gemm_engine.torch.moe import route  # noqa: E402

F = torch.nn.functional


def _reference(moe, x):
    """The layer token by token: the top-k experts' SwiGLU MLPs weighted by the softmax of their logits."""
    up, down, k = moe.experts.up, moe.experts.down, moe.top_k
    logits = x @ moe.router.weight.T
    top, chosen = logits.topk(k, dim=-1)
    weights = top.softmax(-1)
    out = []
    for t in range(x.shape[0]):
        acc = 0
        for slot in range(k):
            e = int(chosen[t, slot])
            z = up[e] @ x[t]
            acc = acc + weights[t, slot] * (down[e] @ (F.silu(z[0::2]) * z[1::2]))
        out.append(acc)
    return torch.stack(out)


def _layer(seed=0, hidden=24, ffn=20, experts=5, top_k=2):
    torch.manual_seed(seed)
    return MoE(hidden, ffn, experts, top_k, dtype=torch.float64)


def test_moe_matches_a_loop_over_tokens_with_every_gradient():
    moe = _layer()
    x = torch.randn(2, 9, 24, dtype=torch.float64, requires_grad=True)
    y = moe(x)
    assert y.shape == x.shape
    gy = torch.randn_like(y)
    y.backward(gy)
    got = [x.grad] + [p.grad for p in moe.parameters()]
    x2 = x.detach().clone().requires_grad_()
    moe.zero_grad()
    ref = _reference(moe, x2.reshape(-1, 24)).reshape(x.shape)
    ref.backward(gy)
    # the routing weights are float32 (what the kernels read): float64 elsewhere, so within 1e-6
    want = [x2.grad] + [p.grad for p in moe.parameters()]
    for name, g, w in zip(["y", "x", "router", "up", "down"], [y.detach()] + got, [ref.detach()] + want):
        assert float((g - w).abs().max()) <= 1e-6 * float(w.abs().max()), name


def test_routing_leaves_experts_empty_and_sorts_pairs_by_expert():
    logits = torch.tensor([[5.0, 0, 0, 1], [4.0, 0, 0, 3], [0, 0, 2.0, 9]])    # expert 1 gets no token
    pairs, offsets, weights = route(logits, 2)
    assert offsets.dtype == torch.int32 and offsets.tolist() == [2, 2, 3, 6]
    assert (pairs // 2).tolist() == [0, 1, 2, 0, 1, 2]                      # expert 0, then 2, then 3
    assert torch.allclose(weights[:2], torch.tensor([5.0, 4.0]).exp() / torch.tensor([5.0, 4.0]).exp().add(
        torch.tensor([1.0, 3.0]).exp()))


def test_experts_from_mixtral_weights_interleave_gate_and_up():
    torch.manual_seed(3)
    w1, w3, w2 = (torch.randn(3, 8, 6, dtype=torch.float64), torch.randn(3, 8, 6, dtype=torch.float64),
                  torch.randn(3, 6, 8, dtype=torch.float64))
    experts = Experts.from_weights(w1, w3, w2)
    x, counts = torch.randn(7, 6, dtype=torch.float64), [3, 0, 4]
    offsets = torch.tensor(counts).cumsum(0).to(torch.int32)
    y = experts(x, offsets)
    rows = torch.repeat_interleave(torch.arange(3), torch.tensor(counts))
    want = torch.stack([w2[e] @ (F.silu(w1[e] @ x[t]) * (w3[e] @ x[t])) for t, e in enumerate(rows.tolist())])
    assert torch.allclose(y, want, atol=1e-12)
    with pytest.raises(ValueError, match="must be"):
        Experts.from_weights(w1, w3, w2.mT)


def test_torch_compile_traces_the_layer_whole():
    moe = _layer(seed=1)
    x = torch.randn(6, 24, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(moe, fullgraph=True, backend="aot_eager")
    y = compiled(x)
    gx, = torch.autograd.grad(y.sum(), x)
    y0 = moe(x)
    gx0, = torch.autograd.grad(y0.sum(), x)
    assert torch.allclose(y, y0) and torch.allclose(gx, gx0)


def test_top_k_out_of_range_is_refused():
    with pytest.raises(ValueError, match="top_k must be between 1 and experts"):
        MoE(8, 8, 4, top_k=5)


@pytest.mark.parametrize("fmt", ["int4", "int8"])
def test_quantized_experts_run_the_layer_on_their_codes(fmt):
    """MoE with its experts quantized (Experts.quantized): the layer over the dequantized weights,
    for inference and for x's gradient; the codes themselves take none."""
    torch.manual_seed(4)
    moe = MoE(64, 32, 5, 2)                # float32: quantized weights multiply 16- and 32-bit activations
    x = torch.randn(11, 64)
    quantized = moe.experts.quantized(fmt, group_size=32, symmetric=False)
    assert "format=" + fmt in repr(quantized) and not list(quantized.parameters())
    with torch.no_grad():        # the reference: the same layer over the weights the codes stand for
        moe.experts.up.copy_(torch.from_numpy(quantized.up.dequantize()).mT)
        moe.experts.down.copy_(torch.from_numpy(quantized.down.dequantize()).mT)
        want = moe(x)
    moe.experts = quantized
    with torch.no_grad():
        got = moe(x)
    assert float((got - want).abs().max()) <= 1e-5 * float(want.abs().max())
    xr = x.clone().requires_grad_()
    moe(xr).sum().backward()
    assert xr.grad is not None and torch.isfinite(xr.grad).all()
