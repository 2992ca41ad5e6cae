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
the kernel's epilogue (`epilogue.spec`; number scales fold into ``alpha``), so they cost nothing
on the tensor cores. Block scales change along K, so they cannot wait for the epilogue: the global
levels that promote partial sums (``applies_block_scales``: the wgmma kernels on sm_90a,
`global_.promotion`) apply them per block of K on the tensor cores; for any other composition
the engine dequantizes the operands to float32 first (`dequantize`, call/prepare.py) and the product
runs in float32 (exact float32 FMA unless ``precision="tf32"``): correct on every device, slower.
Scales are finite numbers: a non-finite number scale is refused (the kernel scales the sums, which
differs from scaling the operands where infinities meet).

A scale with the wrong shape or dtype raises ValueError / TypeError naming ``scale_a`` /
``scale_b`` before anything runs; the result is float32 for integer operands (W8A8), else the
product's dtype, unless ``out_dtype`` says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: K per block of a block scale.
BLOCK = 128
#: The dtypes a scale array may hold (converted to float32 for the kernels).
SCALE_DTYPES = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class Scale:
    """One operand's checked scale: ``kind`` "tensor", "row" (of a), "col" (of b), "block" or (grouped
    calls) "group";
    ``number`` for a per-tensor real number, else ``array`` (the imported array, as given)."""

    kind: str
    number: float | None = None
    array: object | None = None
    #: A grouped call's scale with a leading axis of groups (epilogue/grouped_terms.py; kind
    #: "group": one value per group).
    per_group: bool = False


def check_scale(value, label: str, m: int, n: int, k: int, lhs: bool) -> Scale | None:
    """The kind of ``value``: None, a Python float (per tensor), or an imported array (anything with
    ``shape`` and ``dtype``) whose shape tells the kind (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, float):
        return Scale("tensor", number=value)
    if np.dtype(value.dtype).name not in SCALE_DTYPES:
        raise TypeError(f"matmul: {label} must hold floating-point values ({', '.join(SCALE_DTYPES)}), "
                        f"got dtype {np.dtype(value.dtype).name!r}")
    dims = tuple(int(x) for x in value.shape)
    if int(np.prod(dims, dtype=np.int64)) == 1:
        return Scale("tensor", array=value)       # one value, whatever its shape: per tensor
    blocks_k = -(-k // BLOCK)
    if lhs:
        kinds = {(m,): "row", (m, 1): "row", (m, blocks_k): "block"}
        expected = f"a number, one element, (M,) = ({m},), (M, 1) or (M, ceil(K/128)) = ({m}, {blocks_k})"
    else:
        blocks_n = -(-n // BLOCK)
        kinds = {(n,): "col", (1, n): "col", (blocks_k, blocks_n): "block"}
        expected = (f"a number, one element, (N,) = ({n},), (1, N) or (ceil(K/128), ceil(N/128)) = "
                    f"({blocks_k}, {blocks_n})")
    kind = kinds.get(dims)
    if kind is None:
        raise ValueError(f"matmul: {label} has shape {dims}; expected {expected}")
    return Scale(kind, array=value)


def dequantize(values, scale: Scale | None, scale_values, lhs: bool, k: int, n: int, xp):
    """``values`` (the operand, batch axes first, as the caller's library holds it; ``xp``: that
    library, numpy or torch) in float32 times its scale (``scale_values``: the scale array's values
    in that library, or None for a number), expanded to the operand's shape."""
    vector = len(values.shape) == 1      # a 1-D operand: one row of a, one column of b
    if vector:
        values = values.reshape((1, -1) if lhs else (-1, 1))
    result = _scaled(values, scale, scale_values, lhs, k, n, xp)
    return result.reshape(-1) if vector else result


def _scaled(values, scale: Scale | None, s, lhs: bool, k: int, n: int, xp):
    torch = xp.__name__ == "torch"
    out = values.to(xp.float32) if torch else np.asarray(values).astype(np.float32)
    if scale is None:
        return out
    if scale.number is not None:
        return out * scale.number
    s = s.to(xp.float32) if torch else np.asarray(s, np.float32)
    if scale.kind == "tensor":
        return out * s.reshape(())
    # A grouped call's scale may have a leading axis of groups (`Scale.per_group`) against a
    # (groups, rows, cols) operand.
    lead = (s.shape[0],) if scale.per_group else ()
    if scale.kind == "group":
        return out * s.reshape(-1, 1, 1)
    if scale.kind == "row":
        return out * s.reshape(*lead, -1, 1)
    if scale.kind == "col":
        return out * s.reshape(*lead, 1, -1)
    if lhs:   # (M, ceil(K/128)) -> (M, K)
        full = _repeat(xp, s, BLOCK, -1)[..., :k]
    else:     # (ceil(K/128), ceil(N/128)) -> (K, N)
        full = _repeat(xp, _repeat(xp, s, BLOCK, -2), BLOCK, -1)[..., :k, :n]
    return out * full


def _repeat(xp, x, count: int, axis: int):
    return x.repeat_interleave(count, dim=axis) if xp.__name__ == "torch" else np.repeat(x, count, axis=axis)
