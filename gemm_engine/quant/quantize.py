"""`quantize`: a float (K, N) weight to a `QuantizedWeight` (round to nearest, min-max scales).

Per group of ``group_size`` rows of K (the last group may be shorter) and per column:

* symmetric int4 / int8: ``scale = max|w| / 7`` (127), codes ``round(w / scale) + zero`` with the
  implicit zero 8 (128), clamped to the code range;
* asymmetric int4 / int8 (the range widened to hold 0): ``scale = (max - min) / 15`` (255),
  ``zero = round(-min / scale)``
  clamped to the code range, codes ``round(w / scale) + zero``, clamped;
* fp8 e4m3 (symmetric only): ``scale = max|w| / 448``, codes the e4m3 rounding of ``w / scale``.

Scales are rounded (up) to their 16-bit type first and the codes computed with the rounded scale, so
`QuantizedWeight.dequantize` is the nearest grid point to ``w`` the stored scale describes. A group
of zeros gets scale 1. Quantization is a one-time host step (numpy), not a kernel.
"""
from __future__ import annotations

import numpy as np

from ..tensors import is_torch
from .codes import SCALE_PITCH, fp8_codes, pack, pad_columns, round16, round16_up, scale_word, to_bits16
from .format import KINDS, WeightFormat
from .weight import QuantizedWeight


def host_values(w, label: str = "w") -> np.ndarray:
    """A weight given as numpy, a torch tensor (any device), a device array with ``get()`` or
    anything numpy takes, as a float64 numpy array."""
    if is_torch(w):
        w = w.detach().float().cpu().numpy()
    elif hasattr(w, "get") and not isinstance(w, np.ndarray):   # CuPy / PyOpenCL arrays
        w = w.get()
    arr = np.asarray(w)
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise TypeError(f"quantize: {label} must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def _group_size(group_size, fmt_kind: str, k: int) -> int:
    per_word = 32 // KINDS[fmt_kind][0]
    if group_size is None or group_size == 0 or group_size == -1:
        return 0
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or group_size < 1:
        raise ValueError(f"quantize: group_size must be a positive int or None (per output channel), "
                         f"got {group_size!r}")
    group_size = int(group_size)
    if group_size % per_word:
        raise ValueError(f"quantize: group_size={group_size} is not a multiple of the {per_word} {fmt_kind} codes "
                         f"packed per 32-bit word along K (a word's rows must share one scale)")
    return 0 if group_size >= k else group_size


def quantize(w, format: str = "int4", group_size=128, symmetric: bool = True, scale_dtype=None):
    """``w`` (K, N), in matmul's ``b`` orientation (an ``nn.Linear`` weight is ``W.T``), quantized
    to ``format`` ("int4", "int8", "fp8_e4m3") with one scale (and, ``symmetric=False``, one zero
    point) per ``group_size`` rows of K per column (``None``: per output column). ``scale_dtype``:
    "float16" or "bfloat16" for the scales and zeros (default: w's own 16-bit type, else float16).
    A `QuantizedWeight`; for an (E, K, N) ``w`` (the experts of a mixture-of-experts layer), a
    `QuantizedExperts` of one weight per expert (grouped_matmul's ``b``)."""
    if format not in KINDS:
        raise ValueError(f"quantize: format must be one of {sorted(KINDS)}, got {format!r}")
    if format == "fp8_e4m3" and not symmetric:
        raise ValueError("quantize: fp8_e4m3 weights are symmetric (scales only, no zero points)")
    if scale_dtype is None:
        name = getattr(getattr(w, "dtype", None), "name", "")
        name = str(getattr(w, "dtype", "")).replace("torch.", "") if is_torch(w) else name
        scale_dtype = name if name in ("float16", "bfloat16") else "float16"
    word = scale_word(scale_dtype)
    values = host_values(w)
    if values.ndim == 3 and 0 not in values.shape:     # a mixture-of-experts layer's weights
        from .experts import QuantizedExperts
        return QuantizedExperts([quantize(v, format, group_size, symmetric, scale_dtype) for v in values])
    if values.ndim != 2 or 0 in values.shape:
        raise ValueError(f"quantize: w must be a non-empty (K, N) matrix (or (E, K, N): one per expert), got "
                         f"shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError("quantize: w holds values that are not finite")
    k, n = values.shape
    g = _group_size(group_size, format, k)
    fmt = WeightFormat(format, g, not symmetric, word)
    size = g or k
    groups = fmt.groups(k)
    padded = np.zeros((groups * size, n))
    padded[:k] = values
    blocks = padded.reshape(groups, size, n)
    # Rows past K (a short last group) are zero and must not widen its range: mask them out.
    valid = (np.arange(groups * size) < k).reshape(groups, size, 1)
    # The range always holds 0 (a zero point inside the code range, as GPTQ's quantizer keeps it).
    hi = np.maximum(np.where(valid, blocks, -np.inf).max(axis=1), 0.0)
    lo = np.minimum(np.where(valid, blocks, np.inf).min(axis=1), 0.0)
    bits, implicit = KINDS[format]
    top = (1 << bits) - 1
    if format == "fp8_e4m3":
        scale = np.maximum(np.abs(hi), np.abs(lo)) / 448.0
    elif symmetric:
        scale = np.maximum(np.abs(hi), np.abs(lo)) / (implicit - 1)
    else:
        scale = (hi - lo) / top
    scale = np.where(scale > 0, scale, 1.0)
    # Rounded up, so that the range still fits the codes (an asymmetric int8 grid rounded down by
    # one f16 unit would lose a code at its top).
    scale = round16_up(scale, word).astype(np.float64)
    scale = np.where(scale > 0, scale, round16(np.full(scale.shape, 2.0 ** -14), word))  # underflowed to 0
    per_row = np.repeat(scale, size, axis=0)[:k]
    if format == "fp8_e4m3":
        codes = fp8_codes(values / per_row)
        zeros = None
    else:
        zero = np.full(scale.shape, float(implicit)) if symmetric else np.clip(np.round(-lo / scale), 0, top)
        codes = np.clip(np.round(values / per_row) + np.repeat(zero, size, axis=0)[:k], 0, top).astype(np.uint8)
        zeros = None if symmetric else pad_columns(to_bits16(zero, word), SCALE_PITCH)
    return QuantizedWeight(fmt, k, n, pack(codes, fmt), pad_columns(to_bits16(scale, word), SCALE_PITCH),
                           zeros)


__all__ = ["quantize"]
