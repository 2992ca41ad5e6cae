"""The torch ops on the GPU (skipped without one): CUDA-graph capture and replay, compiling during
capture refused with a clear error, torch.compile(mode="reduce-overhead"), autocast to bf16,
gradcheck in float64, and bf16 training parity of the transformer block.

Run on the GPU machine: ``python -m pytest -q tests/torch/test_cuda_graphs.py``."""
from __future__ import annotations

import numpy as np
import pytest

from torch_cuda import cuda_engine  # noqa: F401  (a fixture)

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
from gemm_engine.torch.block import Block, engine_block, train  # noqa: E402

pytestmark = pytest.mark.cuda


def _randn(*shape, dtype=torch.float32, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=gen, device="cuda", dtype=dtype)


def test_graph_capture_and_replay_with_new_inputs(cuda_engine):
    x, w, bias = _randn(64, 96), _randn(96, 128, seed=1), _randn(128, seed=2)
    gemm_engine.matmul(x, w, bias=bias, activation="swiglu")      # compiles before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = gemm_engine.matmul(x, w, bias=bias, activation="swiglu")
    for seed in range(3):
        x.copy_(_randn(64, 96, seed=10 + seed))
        graph.replay()
        z = x @ w + bias
        assert torch.allclose(y, torch.nn.functional.silu(z[:, 0::2]) * z[:, 1::2], rtol=1e-4, atol=1e-4)


def test_compiling_during_capture_says_to_warm_up(cuda_engine):
    x, w = _randn(48, 80), _randn(80, 72, seed=1)        # a shape class no test ran before
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="capturing a CUDA graph.*[Ww]arm up first"):
        with torch.cuda.graph(graph):
            gemm_engine.matmul(x, w, activation="gelu_tanh")
    gemm_engine.warmup([cuda_engine.problem_for(x, w, activation="gelu_tanh")], engine=cuda_engine)
    graph = torch.cuda.CUDAGraph()       # a graph whose capture was aborted cannot capture again
    with torch.cuda.graph(graph):
        y = gemm_engine.matmul(x, w, activation="gelu_tanh")
    graph.replay()
    assert torch.allclose(y, torch.nn.functional.gelu(x @ w, approximate="tanh"), rtol=1e-4, atol=1e-4)


def test_reduce_overhead_compile(cuda_engine):
    w = _randn(64, 32, seed=1)
    fn = torch.compile(lambda x: gemm_engine.matmul(x, w, activation="relu") * 2, mode="reduce-overhead",
                       fullgraph=True)
    for seed in range(4):
        x = _randn(16, 64, seed=seed)
        assert torch.allclose(fn(x), torch.relu(x @ w) * 2, rtol=1e-4, atol=1e-4)


def test_autocast_to_bfloat16(cuda_engine):
    a, b = _randn(32, 64), _randn(64, 48, seed=1)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got, want = gemm_engine.matmul(a, b), a @ b
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.allclose(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def test_gradcheck_float64(cuda_engine):
    a = _randn(3, 5, dtype=torch.float64).requires_grad_()
    b = _randn(5, 6, dtype=torch.float64, seed=1).requires_grad_()
    bias = _randn(6, dtype=torch.float64, seed=2).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b, bias: gemm_engine.matmul(a, b, bias=bias, activation="swiglu"),
                                    (a, b, bias), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_training_parity_bfloat16(cuda_engine):
    torch.manual_seed(0)
    reference = Block(256, 4, 512, device="cuda", dtype=torch.bfloat16)
    ours = engine_block(reference)
    data = _randn(4, 64, 256, dtype=torch.bfloat16, seed=3), _randn(4, 64, 256, dtype=torch.bfloat16, seed=4)
    want, got = np.array(train(reference, data, 100)), np.array(train(ours, data, 100))
    assert want[-1] < 0.5 * want[0]
    # bf16 products of two libraries round differently: the curves agree to bf16's few digits.
    assert np.max(np.abs(got - want) / want) < 5e-2, (got[::10], want[::10])


@pytest.mark.parametrize("shape, algorithm, needs", [
    ((16, 4096, 14336), None, "kept"),             # the default: the split tail's flags (kept scratch)
    ((64, 256, 8192), "split_k_wgmma", "workspace"),  # partial sums in a per-call workspace
], ids=["split_tail", "split_k"])
def test_capture_of_plans_with_scratch_memory(cuda_engine, shape, algorithm, needs):
    # Warmed on the current stream, captured on torch.cuda.graph's own (global mode: cudaMalloc
    # would invalidate it): the scratch comes from torch's allocator, into the graph's pool, and
    # eager calls between replays (which reuse CuPy's pool) cannot touch it.
    m, n, k = shape
    x, w = _randn(m, k, dtype=torch.bfloat16), _randn(n, k, dtype=torch.bfloat16, seed=1).T
    plan = cuda_engine.plan_for(cuda_engine.problem_for(x, w), algorithm)
    assert getattr(plan, needs) is not None, f"the test needs a plan with {needs} memory: choose another shape"
    cuda_engine.matmul(x, w, algorithm=algorithm)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = cuda_engine.matmul(x, w, algorithm=algorithm)
    for seed in range(3):
        x.copy_(_randn(m, k, dtype=torch.bfloat16, seed=20 + seed))
        other = _randn(m, k, dtype=torch.bfloat16, seed=40 + seed)
        eager = cuda_engine.matmul(other, w, algorithm=algorithm)     # its own scratch, from CuPy's pool
        graph.replay()
        for got, a in ((y, x), (eager, other)):
            want = a.double() @ w.double()
            assert float((got.double() - want).norm() / want.norm()) < 1e-2
