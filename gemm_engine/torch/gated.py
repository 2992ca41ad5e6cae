"""A gated MLP projection (SwiGLU, GeGLU, ReGLU) in training: its two products as contiguous halves,
torch's vectorized elementwise kernels, and backward GEMMs that read and write the interleaved
weight's rows in place.

`SwiGLU` keeps the gate and up rows of its weight interleaved (row 2j: gate j, row 2j + 1: up j) so
that inference runs one GEMM with the gate in its epilogue. Training keeps the products for the
backward instead, as torch's ``mm`` + ``silu`` + ``mul`` keep them. Gating the interleaved product
``z[..., 0::2]`` / ``z[..., 1::2]`` through torch's autograd cost the H100's block step about 1 ms
of 11: the elementwise kernels read stride-2 views (torch's unvectorized loop), and the backward of
each strided view zero-fills a tensor of z's size, copies into it and adds the two (fill, copy and
add kernels of 235 MB each at 4096 tokens x 2 x 14336; bench/results/h100/block_profile.md).

Here instead, with ``W`` the interleaved weight (2H x K) and ``x`` (M x K):

* forward: ``x @ W.view(H, 2, K).permute(1, 2, 0)`` is one batched product of the engine (a batch
  of 2: the gate rows, the up rows, each read column-major with leading dimension 2K, in place)
  writing z as (2, M, H): the gate's and the up projection's products, each contiguous; then
  ``gate(zg) * zu`` by torch's vectorized kernels;
* backward: ``dzg = gate'(zg) * (gy * zu)`` and ``dzu = gy * gate(zg)`` (torch's vectorized
  derivative kernels; ``gate(zg)`` kept from the forward, as torch keeps it); ``dx = dzg @ Wg +
  dzu @ Wu`` as two GEMMs, the second adding the first through its ``c`` term; ``dWg = dzg^T @ x``
  and ``dWu = dzu^T @ x`` written in place into the interleaved gradient's rows (``out`` with rows
  2K apart: views.py `out_view`). Writing dz interleaved instead (one GEMM each for dx
  and dW) cost its two elementwise kernels 2.2x their time (stride-2 writes of 2-byte halves:
  0.26 ms each a step at 4096 tokens) and a stack afterwards 0.7 ms.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from ..api import matmul
from .gates import GATES


class GatedProjection(torch.autograd.Function):
    """``gate(x @ Wg.T + bg) * (x @ Wu.T + bu)`` over the interleaved ``weight`` (see the module
    docstring); ``x`` is 2-D (tokens x in_features)."""

    @staticmethod
    def forward(ctx, x, weight, bias, name):
        hidden, k = weight.shape[0] // 2, weight.shape[1]
        z = matmul(x, weight.view(hidden, 2, k).permute(1, 2, 0))       # (2, M, H)
        if bias is not None:
            z += bias.view(hidden, 2).t().unsqueeze(1)
        ctx.name, ctx.has_bias = name, bias is not None
        gate = GATES[name][0]
        gated = gate(z[0])
        ctx.save_for_backward(x, weight, z, gated)
        return gated * z[1]

    @staticmethod
    @once_differentiable     # the derivative kernels (aten's silu_backward...) have none of their own
    def backward(ctx, gy):
        x, weight, z, gated = ctx.saved_tensors
        _, derivative, more = GATES[ctx.name]
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        dzg, dzu = derivative(gy * z[1], z[0], *more), gy * gated
        if torch.compiler.is_compiling():
            # Traced: dz interleaved by a stack (the op returns new tensors under torch.compile),
            # then one GEMM each; inductor fuses the stack with the elementwise kernels.
            dz = torch.stack((dzg, dzu), dim=-1).flatten(-2)
            return (matmul(dz, weight) if need_x else None, matmul(dz.mT, x) if need_w else None,
                    dz.sum(0) if need_b and ctx.has_bias else None, None)
        hidden, k = weight.shape[0] // 2, weight.shape[1]
        rows = weight.view(hidden, 2, k)                  # [:, 0]: the gate's rows, [:, 1]: the up's
        gx = gw = gb = None
        if need_x:
            gx = matmul(dzu, rows[:, 1], c=matmul(dzg, rows[:, 0]), beta=1.0)
        if need_w:
            gw = torch.empty_like(weight)
            halves = gw.view(hidden, 2, k)
            matmul(dzg.mT, x, out=halves[:, 0])           # written in place, rows 2K apart
            matmul(dzu.mT, x, out=halves[:, 1])
        if need_b and ctx.has_bias:
            gb = torch.stack((dzg.sum(0), dzu.sum(0)), dim=-1).flatten()
        return gx, gw, gb, None


def gated_projection(x, weight, bias, name: str):
    """`GatedProjection` on ``x`` of any leading shape (flattened to tokens and back)."""
    lead = x.shape[:-1]
    y = GatedProjection.apply(x.reshape(-1, x.shape[-1]), weight, bias, name)
    return y.reshape(*lead, y.shape[-1])
