"""torch/warmup.py: the distinct linear layers of a model as warm-up compiles them (nn.Linear, the
engine's Linear with its activation, SwiGLU as its doubled projection), the first weight's dtype and
whether it is on the CPU."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

from torch import nn  # noqa: E402

from gemm_engine.torch.modules import Linear, SwiGLU  # noqa: E402
from gemm_engine.torch.warmup import model_layers  # noqa: E402


def test_distinct_layers_in_order():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4, bias=False), nn.Linear(8, 16),
                          Linear(4, 12, activation="gelu"), SwiGLU(12, 6))
    layers, dtype, host = model_layers(model)
    assert layers == [(8, 16, True, None, False), (16, 4, False, None, False), (4, 12, True, "gelu", False),
                      (12, 12, False, "swiglu", False)]
    assert dtype == torch.float32 and host
    # training: SwiGLU's two products as a batch of 2, gated outside the GEMM (torch/gated.py)
    assert model_layers(model, training=True)[0][-1] == (12, 12, False, None, True)


def test_dtype_is_the_first_weights_and_no_layers_means_none():
    model = nn.Sequential(nn.Linear(4, 4).to(torch.float64), nn.Linear(4, 4))
    assert model_layers(model)[1] == torch.float64
    assert model_layers(nn.Sequential(nn.ReLU())) == ([], None, True)
