"""Training parity: a small transformer block (attention projections and a SwiGLU MLP) trained 100
AdamW steps with torch's modules and, from the same parameters and data, with the engine's (its
linear layers on the engine, gate and up fused in one GEMM): the loss curves agree. float32 on
the CPU here (PoCL); the bf16 run on the GPU is in test_cuda_graphs.py."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

from gemm_engine.torch import Linear, SwiGLU  # noqa: E402
from gemm_engine.torch.block import Block, engine_block, train  # noqa: E402


@pytest.fixture(autouse=True)
def _opencl_default(opencl_engine, monkeypatch):
    from gemm_engine import api
    monkeypatch.setattr(api, "_default_engine", opencl_engine)


def test_engine_block_computes_with_the_engines_modules():
    torch.manual_seed(0)
    block = engine_block(Block(16, 2, 32))
    kinds = {type(m) for m in block.modules()}
    assert Linear in kinds and SwiGLU in kinds and torch.nn.Linear not in kinds


def test_training_parity_100_steps():
    torch.manual_seed(0)
    reference = Block(32, 4, 64)
    ours = engine_block(reference)
    gen = torch.Generator().manual_seed(1)
    data = torch.randn(2, 16, 32, generator=gen), torch.randn(2, 16, 32, generator=gen)
    want = np.array(train(reference, data, 100))
    got = np.array(train(ours, data, 100))
    assert want[-1] < 0.2 * want[0], "the reference did not learn: the comparison would say little"
    err = np.abs(got - want) / want
    assert err.max() < 1e-4, f"loss curves part at step {err.argmax()}: {got[err.argmax()]} against {want[err.argmax()]}"
