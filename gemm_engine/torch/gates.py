"""The engine's activations in torch's own kernels: the gates of gated.py's training path, and the
activations ``torch.ops.gemm_engine.grouped_mm`` differentiates, with their gradients.

A grouped product's epilogue may end in an activation, elementwise (``y = f(z) * rs``) or gated
(SwiGLU: ``y = gate(z[2j]) * z[2j + 1] * rs``, the gate and up columns interleaved in each
expert's weights: an MoE up projection with its routing weight in one launch). Its backward
needs the pre-activation ``z = a @ b + bias``: a product that requires grad keeps it from its
forward (grouped.py: z by the grouped product, then ``activated``, as torch's own layers keep it),
one that does not (quantized experts' forward is the fused kernel) recomputes it by one grouped
product; ``gz`` comes from torch's derivative kernels (aten's silu_backward...: vectorized, traced by
torch.compile); the operands' gradients then follow from gz as a plain grouped product's do
(grouped.py). Only these names: an activation of one's own has no torch formula here, and a call
that needs its gradient is refused before it runs (`differentiable_activation`).
"""
from __future__ import annotations

import torch
from torch.nn import functional as F

#: gate name -> (the gate, its derivative: an aten op of (upstream gradient, input, *more), more).
GATES = {
    "swiglu": (F.silu, torch.ops.aten.silu_backward, ()),
    "geglu": (F.gelu, torch.ops.aten.gelu_backward, ()),
    "reglu": (F.relu, torch.ops.aten.threshold_backward, (0,)),
}


def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def _gelu_tanh_backward(gy, x):
    return torch.ops.aten.gelu_backward(gy, x, approximate="tanh")


#: name -> (the function, its derivative: an op of (upstream gradient, input, *more), more).
ELEMENTWISE = {
    "relu": (F.relu, torch.ops.aten.threshold_backward, (0,)),
    "silu": (F.silu, torch.ops.aten.silu_backward, ()),
    "gelu": (F.gelu, torch.ops.aten.gelu_backward, ()),
    "gelu_tanh": (_gelu_tanh, _gelu_tanh_backward, ()),
}


def differentiable_activation(key: str) -> bool:
    """Whether the activation of schema string ``key`` ("" none) has a gradient here."""
    return not key or key in ELEMENTWISE or key in GATES


def activated(z, row_scale, key: str):
    """``f(z) * row_scale`` (``row_scale`` None: 1) by torch's kernels, in z's dtype."""
    if key in GATES:
        y = GATES[key][0](z[..., 0::2]) * z[..., 1::2]
    else:
        y = ELEMENTWISE[key][0](z)
    return y if row_scale is None else y * row_scale[..., None].to(y.dtype)


def activation_grad(z, gy, row_scale, key: str, need_scale: bool):
    """(gz, grow_scale): the gradient of the pre-activation ``z`` for the upstream gradient ``gy``
    of ``f(z) * row_scale`` (``row_scale`` None: 1), and, where ``need_scale``, the row scale's
    (``f(z) * gy`` summed per row)."""
    gz = gy if row_scale is None else gy * row_scale[..., None].to(gy.dtype)
    if key in GATES:
        gate, derivative, more = GATES[key]
        g, u = z[..., 0::2], z[..., 1::2]
        gated = gate(g)
        values = gated * u if need_scale else None
        if torch.compiler.is_compiling():
            # Traced: interleaved by a stack, which inductor fuses with the elementwise kernels.
            gz = torch.stack((derivative(gz * u, g, *more), gz * gated), dim=-1).flatten(-2)
        else:
            # Both partial derivatives written into z's interleaved columns where they go: a stack
            # of them was a pass of its own over twice their bytes (Mixtral's up projection at
            # 8192 routed rows: 1.15 ms of a 19.7 ms training step on the H200).
            scaled, gz = gz, torch.empty_like(z)
            derivative.grad_input(scaled * u, g, *more, grad_input=gz[..., 0::2])
            torch.mul(scaled, gated, out=gz[..., 1::2])
    else:
        function, derivative, more = ELEMENTWISE[key]
        values = function(z) if need_scale else None
        gz = derivative(gz, z, *more)
    scale = (values * gy).sum(-1).to(row_scale.dtype) if need_scale else None
    return gz, scale
