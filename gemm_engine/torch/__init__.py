"""gemm_engine for PyTorch: registered ops, autograd, drop-in modules (needs torch).

    >>> import torch, gemm_engine
    >>> from gemm_engine.torch import Linear, SwiGLU, replace_linear
    >>> y = gemm_engine.matmul(x, w, bias=b, activation="gelu")   # a grad_fn where x requires grad
    >>> model = replace_linear(model)                              # nn.Linear -> gemm_engine's Linear

* ``torch.ops.gemm_engine.matmul`` / ``matmul_fused`` / ``scaled_matmul`` (ops.py): fake
  implementations from the engine's own shape and dtype rules, so torch.compile(fullgraph=True)
  and dynamic shapes trace through; autocast casts the float operands.
* ``torch.ops.gemm_engine.grouped_mm`` (grouped.py): the grouped product (contiguous, masked and
  k layouts) with its gradient, also what `gemm_engine.grouped_matmul` runs on tensors that require
  grad or under torch.compile.
* Autograd (autograd.py): an autograd.Function around each op (the ops themselves have no autograd
  kernel, so a compiled graph calls the engine with no Python autograd frame); backward by the
  engine (transposed views, the activation's derivative as a fused epilogue); fp8 / int8 scaled
  products have none.
* ``torch.ops.gemm_engine.quantized_mm`` (quantized_op.py): a quantized weight's product on its
  packed tensors, with the input's and bias's gradients: what `QuantizedLinear` runs under
  torch.compile (traced whole, fullgraph included).
* `Linear`, `replace_linear`, `SwiGLU` (modules.py); `QuantizedLinear` (quantized_linear.py: int4 /
  int8 / fp8 weights through `gemm_engine.quantized_matmul`); `MoE` and `Experts` (moe.py: a
  mixture-of-experts SwiGLU layer on grouped products); a small transformer block for training
  checks (block.py).

Eager calls without grad stay on the engine's direct path (no dispatcher): `gemm_engine.matmul`
sends a call here only when it needs torch's machinery (tensors.py `torch_op_wanted`). Importing
this package is optional: that first such call imports it. ``import gemm_engine`` never imports
torch.
"""
from __future__ import annotations

from . import autograd, grouped, ops, quantized_op  # noqa: F401  (registers the ops and their backward formulas)
from .modules import Linear, SwiGLU, linear, replace_linear
from .moe import Experts, MoE, QuantizedExpertMLPs
from .ops import activation_key, engine_handle
from .quantized_linear import QuantizedLinear

__all__ = ["Experts", "Linear", "MoE", "QuantizedExpertMLPs", "QuantizedLinear", "SwiGLU", "activation_key",
           "engine_handle", "linear", "replace_linear"]
