"""torch.ops.gemm_engine.grouped_mm on the GPU (skipped without one): bf16 mixture-of-experts
layers with gradients against float64 references, forward and backward captured in one CUDA graph
and replayed with new routing, and torch.compile's default backend (inductor).

Run on the GPU machine: ``python -m pytest -q tests/torch/test_grouped_op_cuda.py``."""
from __future__ import annotations

import pytest

from torch_cuda import cuda_engine  # noqa: F401  (a fixture)

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
import gemm_engine.torch  # noqa: E402,F401

pytestmark = pytest.mark.cuda

#: Relative error (Frobenius) of bf16 operands with float32 sums against float64.
TOL = 2e-2


def _randn(*shape, seed, scale=1.0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(torch.bfloat16)


def _rel(got, want):
    return float((got.double() - want).norm() / want.norm().clamp_min(1e-30))


def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def _contiguous_reference(x, w, ends, bias, scale, gy):
    """float64 output and gradients of the contiguous layout, group by group (w: (G, K, N))."""
    x, w, bias, scale = (t.detach().double().requires_grad_() for t in (x, w, bias, scale))
    outs, start = [], 0
    for g, end in enumerate(ends.tolist()):
        outs.append((x[start:end] @ w[g] + bias[g]) * scale[start:end, None])
        start = end
    y = torch.cat(outs)
    y.backward(gy.double())
    return y.detach(), x.grad, w.grad, bias.grad, scale.grad


@pytest.mark.parametrize("weights", ["kn", "nk"], ids=["w_rows", "w_as_linear"])
def test_contiguous_layer_gradients(cuda_engine, weights):
    counts = [130, 0, 1, 257, 64, 3]                     # ragged, an empty group, not tile multiples
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    t, k, n, g = sum(counts), 192, 136, len(counts)
    x = _randn(t, k, seed=1)
    w = _randn(g, k, n, seed=2, scale=k ** -0.5) if weights == "kn" else _randn(g, n, k, seed=2, scale=k ** -0.5).mT
    bias, scale = _randn(g, n, seed=3), torch.rand(t, device="cuda", dtype=torch.float32) + 0.5
    gy = _randn(t, n, seed=4)
    x_, w_, bias_, scale_ = _leaves(x, w, bias, scale)
    if weights == "nk":
        w_ = w.detach().mT.contiguous().requires_grad_()
        y = gemm_engine.grouped_matmul(x_, w_.mT, offsets=ends, bias=bias_, row_scale=scale_)
    else:
        y = gemm_engine.grouped_matmul(x_, w_, offsets=ends, bias=bias_, row_scale=scale_)
    y.backward(gy)
    want = _contiguous_reference(x, w, ends, bias, scale, gy)
    gw = w_.grad.mT if weights == "nk" else w_.grad
    for name, got, ref in zip(("y", "x", "w", "bias", "row_scale"), (y, x_.grad, gw, bias_.grad, scale_.grad), want):
        assert _rel(got, ref) < TOL, (name, _rel(got, ref))
    assert x_.grad.dtype == torch.bfloat16 and w_.grad.dtype == torch.bfloat16 and scale_.grad.dtype == torch.float32
    # the empty group's weights get a zero gradient, not garbage
    assert (gw[1] == 0).all()


def test_swiglu_up_projection_with_routing_weights(cuda_engine):
    """An MoE up projection in one launch per direction: SwiGLU per expert (gate and up columns
    interleaved), per-expert bias and routing weights, forward and gradients against float64."""
    counts = [130, 0, 1, 257, 64, 3]
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    t, k, n, g = sum(counts), 192, 272, len(counts)
    x, w = _randn(t, k, seed=11), _randn(g, n, k, seed=12, scale=k ** -0.5)
    bias, scale = _randn(g, n, seed=13), torch.rand(t, device="cuda", dtype=torch.float32) + 0.5
    gy = _randn(t, n // 2, seed=14)
    x_, w_, bias_, scale_ = _leaves(x, w, bias, scale)
    y = gemm_engine.grouped_matmul(x_, w_.mT, offsets=ends, bias=bias_, row_scale=scale_, activation="swiglu")
    assert y.shape == (t, n // 2)
    y.backward(gy)
    xd, wd, bd, sd = (v.detach().double().requires_grad_() for v in (x, w, bias, scale))
    outs, start = [], 0
    for e, end in enumerate(ends.tolist()):
        z = xd[start:end] @ wd[e].T + bd[e]
        outs.append(torch.nn.functional.silu(z[:, 0::2]) * z[:, 1::2] * sd[start:end, None])
        start = end
    ref = torch.cat(outs)
    ref.backward(gy.double())
    for name, got, want in (("y", y, ref), ("x", x_.grad, xd.grad), ("w", w_.grad, wd.grad), ("bias", bias_.grad, bd.grad),
                            ("row_scale", scale_.grad, sd.grad)):
        assert _rel(got, want.detach()) < TOL, (name, _rel(got, want.detach()))


def test_masked_layer_gradients_ignore_rows_past_the_counts(cuda_engine):
    g, c, k, n = 4, 96, 128, 200
    counts = torch.tensor([96, 0, 37, 1], device="cuda", dtype=torch.int32)
    x = _randn(g, c, k, seed=5)
    live = torch.arange(c, device="cuda")[None, :] < counts[:, None]
    x = torch.where(live[..., None], x, torch.full_like(x, float("nan")))     # never read into a result
    w, gy = _randn(g, k, n, seed=6, scale=k ** -0.5), _randn(g, c, n, seed=7)
    x_, w_ = _leaves(x, w)
    y = gemm_engine.grouped_matmul(x_, w_, counts=counts)
    y.backward(gy)
    xd = torch.where(live[..., None], x.double(), 0)
    gyd = torch.where(live[..., None], gy.double(), 0)
    assert _rel(torch.where(live[..., None], y.double(), 0), xd @ w.double()) < TOL
    assert (y[~live] == 0).all()
    assert _rel(w_.grad, xd.mT @ gyd) < TOL
    assert torch.isfinite(x_.grad).all() and (x_.grad[~live] == 0).all()
    assert _rel(x_.grad, gyd @ w.double().mT) < TOL


def test_weight_gradients_on_the_tma_level_read_only_their_groups_tokens(cuda_engine):
    """The "k" layout (x^T @ dy per group) on the Hopper TMA pipeline, whose copies read zeros past
    a group's last token because the loading unit sets its maps' K extent to the group's end on the
    device. The tokens of one group are infinite in both operands: a slice of the group before it
    that read them (or read zeros in one operand only: 0 * inf) would make that group's sums
    infinite or NaN. Empty groups give zeros; a poisoned given out is written everywhere."""
    from dataclasses import replace

    import ml_dtypes

    from gemm_engine.algorithms import resolve
    from gemm_engine.call.prepare import dense_problem
    from gemm_engine.problem import Groups, Layout

    counts = [0, 130, 1, 0, 257, 64, 3, 0, 70]           # the group of 257 tokens is infinite
    ends = torch.tensor(counts, device="cuda").cumsum(0).to(torch.int32)
    t, h, n, g = sum(counts), 200, 328, len(counts)
    x, dy = _randn(t, h, seed=21), _randn(t, n, seed=22)
    lo, hi = sum(counts[:4]), sum(counts[:5])
    x[lo:hi], dy[lo:hi] = float("inf"), float("inf")
    problem = replace(dense_problem(g, h, n, t, ml_dtypes.bfloat16, lhs_layout=Layout.COL), groups=Groups("k"))
    chosen = resolve("grouped").setup(problem, cuda_engine.runtime.dialect)
    if not chosen.algorithm.endswith("GroupedSpecializedWgmmaAlgorithm"):
        pytest.skip(f"the TMA level does not run here ({chosen.algorithm})")
    out = torch.full((g, h, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_engine.grouped_matmul(x.T, dy, offsets=ends, out=out)
    torch.cuda.synchronize()
    start = 0
    for e, count in enumerate(counts):
        if e != 4:
            want = x[start:start + count].double().T @ dy[start:start + count].double()
            assert torch.isfinite(out[e]).all(), e
            if count:
                assert _rel(out[e], want) < TOL, (e, _rel(out[e], want))
            else:
                assert (out[e] == 0).all(), e
        start += count
    # an output no tensor map addresses (N odd: rows of 654 bytes, stored directly, bounds-checked),
    # per-expert bias and alpha in the epilogue; the finite groups only
    dy = dy[:, :327]
    bias = _randn(g, 327, seed=23)
    got = gemm_engine.grouped_matmul(x.T, dy, offsets=ends, bias=bias, alpha=0.5)
    start = 0
    for e, count in enumerate(counts):
        if e != 4:
            want = 0.5 * (x[start:start + count].double().T @ dy[start:start + count].double()) + bias[e].double()
            assert _rel(got[e], want) < TOL, (e, _rel(got[e], want))
        start += count


def test_forward_and_backward_in_one_graph_replayed_with_new_routing(cuda_engine):
    t, k, n, g = 512, 128, 256, 4
    x, w = _randn(t, k, seed=8), _randn(g, k, n, seed=9, scale=k ** -0.5)
    x_, w_ = _leaves(x, w)
    ends = torch.tensor([128, 256, 384, 512], device="cuda", dtype=torch.int32)
    gy = _randn(t, n, seed=10)

    def step():
        x_.grad = w_.grad = None
        gemm_engine.grouped_matmul(x_, w_, offsets=ends).backward(gy)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):            # warm-up (compiles every kernel) off the capture
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    x_.grad = w_.grad = None
    with torch.cuda.graph(graph):
        gemm_engine.grouped_matmul(x_, w_, offsets=ends).backward(gy)
    gx, gw = x_.grad, w_.grad
    for counts in ([500, 0, 0, 12], [1, 1, 1, 509], [0, 0, 0, 512]):
        ends.copy_(torch.tensor(counts, device="cuda").cumsum(0))
        graph.replay()
        torch.cuda.synchronize()
        _, want_x, want_w, _, _ = _contiguous_reference(x, w, ends, torch.zeros(g, n, device="cuda"),
                                                        torch.ones(t, device="cuda"), gy)
        assert _rel(gx, want_x) < TOL and _rel(gw, want_w) < TOL, counts
        empty = [i for i, c in enumerate(counts) if c == 0]
        assert all((gw[i] == 0).all() for i in empty), counts


def test_inductor_compiles_a_moe_layer_with_its_backward(cuda_engine):
    t, k, n, g = 300, 128, 96, 3
    x, w = _randn(t, k, seed=11), _randn(g, k, n, seed=12, scale=k ** -0.5)
    ends = torch.tensor([100, 100, 300], device="cuda", dtype=torch.int32)
    scale = torch.rand(t, device="cuda") + 0.5

    def layer(x, w, ends, scale):
        return torch.nn.functional.silu(gemm_engine.grouped_matmul(x, w, offsets=ends, row_scale=scale)).sum()

    fn = torch.compile(layer, fullgraph=True)
    x_, w_ = _leaves(x, w)
    fn(x_, w_, ends, scale).backward()
    x0, w0 = _leaves(x, w)
    layer(x0, w0, ends, scale).backward()
    assert _rel(x_.grad, x0.grad.double()) < 1e-2 and _rel(w_.grad, w0.grad.double()) < 1e-2
    assert (w_.grad[1] == 0).all()


def test_moe_layer_trains_against_float64(cuda_engine):
    """gemm_engine.torch.MoE in bf16 on the GPU: output and the gradients of the tokens, the router
    and both projections against the layer computed in float64 by torch (top-2 routing)."""
    from gemm_engine.torch import MoE
    F = torch.nn.functional
    torch.manual_seed(21)
    moe = MoE(64, 48, 6, 2, device="cuda", dtype=torch.bfloat16)
    x = _randn(200, 64, seed=22).requires_grad_()
    y = moe(x)
    gy = _randn(200, 64, seed=23)
    y.backward(gy)
    xd = x.detach().double().requires_grad_()
    router, up, down = (p.detach().double().requires_grad_() for p in moe.parameters())
    # the layer's own choice of experts (bf16 logits can order near-ties differently from float64's)
    chosen = moe.router(x.detach()).topk(2, dim=-1).indices
    top = (xd @ router.T).gather(-1, chosen)
    z = torch.einsum("tkfh,th->tkf", up[chosen], xd)                  # (tokens, 2, 2 ffn)
    h = F.silu(z[..., 0::2]) * z[..., 1::2]
    ref = (torch.einsum("tkhf,tkf->tkh", down[chosen], h) * top.softmax(-1)[..., None]).sum(1)
    ref.backward(gy.double())
    for name, got, want in (("y", y, ref), ("x", x.grad, xd.grad), ("router", moe.router.weight.grad, router.grad),
                            ("up", moe.experts.up.grad, up.grad), ("down", moe.experts.down.grad, down.grad)):
        assert _rel(got, want.detach()) < TOL, (name, _rel(got, want.detach()))


def test_moe_forward_replays_in_a_cuda_graph_with_new_routing(cuda_engine):
    """The layer's routing stays on the device (no host synchronization): its forward captured once
    in a CUDA graph replays with new tokens, routed anew, as an eager call computes them."""
    from gemm_engine.torch import MoE
    torch.manual_seed(31)
    moe = MoE(64, 48, 6, 2, device="cuda", dtype=torch.bfloat16)
    static_x = _randn(96, 64, seed=32)
    with torch.no_grad():
        moe(static_x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = moe(static_x)
        for seed in (33, 34):
            static_x.copy_(_randn(96, 64, seed=seed))
            graph.replay()
            want = moe(static_x)
            assert _rel(static_y, want.double()) < 1e-6
