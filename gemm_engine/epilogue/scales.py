"""Host side of operand scales: ``matmul(a, b, scale_a=, scale_b=)`` computes
``(a * scale_a) @ (b * scale_b)`` from the exact stored values (fp8 or int8 quantized operands, or
any other dtype), then the fused epilogue (alpha, c, bias, activation).

Kinds, told apart by shape (the conventions of torch._scaled_mm, TransformerEngine and DeepGEMM):

* per tensor: a real number, or an array of one element;
* per row of a (``scale_a`` of shape (M,) or (M, 1)) / per column of b (``scale_b`` of shape (N,) or
  (1, N));
* per block (``BLOCK`` = 128 along K): ``scale_a`` (M, ceil(K / 128)), one per row and block of K
  (1 x 128 activations); ``scale_b`` (ceil(K / 128), ceil(N / 128)), one per 128 x 128 block.

Where a shape fits two kinds (M = 1, or K <= 128) the kinds mean the same product. Batched calls
share their scales over the batch. Per-tensor, row and column scales multiply the accumulator in
the kernel's epilogue (`global_.epilogue`; number scales fold into ``alpha``), so they cost nothing
on the tensor cores. Block scales change along K, so they cannot wait for the epilogue: the global
levels that promote partial sums (``applies_block_scales``: the wgmma kernels on sm_90a,
`global_.promotion`) apply them per block of K on the tensor cores; for any other composition
`Engine.matmul` dequantizes the operands to float32 first (`dequantize`) and the product runs in
float32 (exact float32 FMA unless ``precision="tf32"``): correct on every device, slower.

A scale with the wrong shape or dtype raises ValueError / TypeError naming ``scale_a`` /
``scale_b`` before anything runs; the result is float32 for integer operands (W8A8), else the
product's dtype, unless ``out_dtype`` says otherwise.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..call.numpy_rules import CallShape

#: K per block of a block scale.
BLOCK = 128


@dataclass(frozen=True)
class Scale:
    """One operand's checked scale: ``kind`` "tensor", "row" (of a), "col" (of b) or "block";
    ``number`` for a per-tensor real number, else ``array`` (imported, as given)."""

    kind: str
    number: float | None = None
    array: object | None = None


def check_scale(value, imported, label: str, shape: CallShape, lhs: bool) -> Scale | None:
    """The kind of ``value`` (a number, or ``imported``: the value as an `interop.Imported`)."""
    if value is None:
        return None
    if imported is None:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"matmul: {label} must be a real number or an array, got {type(value).__name__}")
        return Scale("tensor", number=float(value))
    if imported.dtype.kind != "f":
        raise TypeError(f"matmul: {label} must hold floating-point values, got dtype {imported.dtype.name!r}")
    dims = tuple(int(x) for x in imported.shape)
    blocks_k = -(-shape.k // BLOCK)
    if lhs:
        kinds = {(): "tensor", (1,): "tensor", (shape.m,): "row", (shape.m, 1): "row",
                 (shape.m, blocks_k): "block"}
        expected = f"a number, (1,), (M,) = ({shape.m},), (M, 1) or (M, ceil(K/128)) = ({shape.m}, {blocks_k})"
    else:
        blocks_n = -(-shape.n // BLOCK)
        kinds = {(): "tensor", (1,): "tensor", (shape.n,): "col", (1, shape.n): "col",
                 (blocks_k, blocks_n): "block"}
        expected = (f"a number, (1,), (N,) = ({shape.n},), (1, N) or (ceil(K/128), ceil(N/128)) = "
                    f"({blocks_k}, {blocks_n})")
    kind = kinds.get(dims)
    if kind is None:
        raise ValueError(f"matmul: {label} has shape {dims}; expected {expected}")
    if dims == (1, 1) or int(np.prod(dims, dtype=np.int64)) == 1:
        kind = "tensor" if kind != "block" else kind
    return Scale(kind, array=imported)


def dequantize(values: np.ndarray | object, scale: Scale | None, lhs: bool, shape: CallShape, xp):
    """``values`` (the operand, batch axes first, as the caller's library holds it; ``xp``: that
    library, numpy or torch) in float32 times its scale, expanded to the operand's shape."""
    vector = len(values.shape) == 1      # a 1-D operand: one row of a, one column of b
    if vector:
        values = values.reshape((1, -1) if lhs else (-1, 1))
    result = _scaled(values, scale, lhs, shape, xp)
    return result.reshape(-1) if vector else result


def _scaled(values, scale: Scale | None, lhs: bool, shape: CallShape, xp):
    if xp.__name__ == "torch":
        out = values.to(xp.float32)
        s = None if scale is None else scale.number if scale.array is None else scale.array.original.to(xp.float32)
    else:
        out = np.asarray(values).astype(np.float32)
        s = None if scale is None else scale.number if scale.array is None else np.asarray(scale.array.array, np.float32)
    if s is None:
        return out
    if scale.kind == "tensor":
        return out * (s if isinstance(s, float) else s.reshape(()))
    if scale.kind == "row":
        return out * s.reshape(-1, 1)
    if scale.kind == "col":
        return out * s.reshape(1, -1)
    k = shape.k
    if lhs:   # (M, ceil(K/128)) -> (M, K)
        full = _repeat(xp, s, BLOCK, 1)[:, :k]
    else:     # (ceil(K/128), ceil(N/128)) -> (K, N)
        full = _repeat(xp, _repeat(xp, s, BLOCK, 0), BLOCK, 1)[:k, :shape.n]
    return out * full


def _repeat(xp, x, count: int, axis: int):
    return x.repeat_interleave(count, dim=axis) if xp.__name__ == "torch" else np.repeat(x, count, axis=axis)
