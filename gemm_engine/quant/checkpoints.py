"""`QuantizedWeight` from the packed tensors of GPTQ and AWQ checkpoints (their documented bit orders).

* **GPTQ** (AutoGPTQ's ``QuantLinear``): ``qweight`` int32 (K * bits / 32, N), codes packed along K,
  row ``r * (32 / bits) + j`` of column n in bits ``[bits * j, bits * (j + 1))`` of ``qweight[r, n]``
  (exactly format.py's ``k_packed`` layout); ``qzeros`` int32 (groups, N * bits / 32), the zero
  points packed the same way along N and stored minus one (the original "v1" checkpoint format:
  a kernel adds 1; ``zero_offset=0`` for checkpoints saved without it); ``scales`` (groups, N)
  float16; ``g_idx`` the group of each row of K (act-order checkpoints permute rows: refused).
* **AWQ** (AutoAWQ's GEMM layout): ``qweight`` int32 (K, N / 8), packed along N: nibble i of word
  ``qweight[k, c]`` holds column ``8c + (0, 2, 4, 6, 1, 3, 5, 7)[i]``; ``qzeros`` int32 (groups,
  N / 8) packed the same way, stored as is; ``scales`` (groups, N) float16.

Either way a value is ``(code - zero) * scale``. Checkpoints whose zero points are all the implicit
zero (8 for 4 bits, 128 for 8 bits: symmetric GPTQ) become the symmetric format (no zeros array).
"""
from __future__ import annotations

import numpy as np

from ..tensors import is_torch
from .codes import SCALE_PITCH, pack, pad_columns, scale_word, to_bits16
from .format import KINDS, WeightFormat
from .weight import QuantizedWeight

#: AWQ's order of the columns inside a word: nibble i holds column AWQ_ORDER[i] of its 8.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
_BITS = {4: "int4", 8: "int8"}


def _ints(x, label: str) -> np.ndarray:
    """A packed int32 tensor (numpy or torch, any device) as uint32 words."""
    if is_torch(x):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.dtype not in (np.int32, np.uint32) or x.ndim != 2:
        raise ValueError(f"{label} must be a 2-D int32 array, got {x.dtype} {x.shape}")
    return np.ascontiguousarray(x).view(np.uint32)


def _scales(x, label: str) -> tuple[np.ndarray, str]:
    """(float32 values, storage word) of a float16 / bfloat16 scales tensor."""
    if is_torch(x):
        name = str(x.dtype).replace("torch.", "")
        x = x.detach().float().cpu().numpy()
    else:
        x = np.asarray(x)
        name = x.dtype.name
    if name not in ("float16", "bfloat16") or np.ndim(x) != 2:
        raise ValueError(f"{label} must be a 2-D float16 or bfloat16 array, got {name} {np.shape(x)}")
    return np.asarray(x, np.float32), scale_word(name)


def _unpack_columns(words: np.ndarray, bits: int, order) -> np.ndarray:
    """(rows, cols * 32 / bits) codes of words packed along the columns: code i of word c is
    column ``c * per_word + order[i]``."""
    per = 32 // bits
    rows, cols = words.shape
    out = np.empty((rows, cols, per), np.uint8)
    for i, column in enumerate(order):
        out[:, :, column] = (words >> np.uint32(bits * i)) & np.uint32((1 << bits) - 1)
    return out.reshape(rows, cols * per)


def _group(group_size, k: int, groups: int, label: str) -> int:
    g = 0 if group_size in (None, -1, 0) else int(group_size)
    if g >= k:
        g = 0
    want = -(-k // g) if g else 1
    if groups != want:
        raise ValueError(f"{label}: {groups} rows of scales, but K = {k} with group_size={group_size} has "
                         f"{want} groups")
    return g


def _weight(kind: str, g: int, codes: np.ndarray, scale: np.ndarray, zero: np.ndarray, word: str) -> QuantizedWeight:
    k, n = codes.shape
    implicit = KINDS[kind][1]
    symmetric = bool(np.all(zero == implicit))
    fmt = WeightFormat(kind, g, not symmetric, word)
    scales = pad_columns(to_bits16(scale, word), SCALE_PITCH)
    zeros = None if symmetric else pad_columns(to_bits16(zero, word), SCALE_PITCH)
    return QuantizedWeight(fmt, k, n, pack(codes, fmt), scales, zeros)


def from_gptq(qweight, qzeros, scales, *, bits: int = 4, group_size=128, g_idx=None,
              zero_offset: int = 1) -> QuantizedWeight:
    """A GPTQ checkpoint's packed layer (see the module docstring) as a `QuantizedWeight`."""
    if bits not in _BITS:
        raise ValueError(f"from_gptq: bits={bits!r}: 4 (int4) and 8 (int8) are supported")
    words = _ints(qweight, "from_gptq: qweight")
    zwords = _ints(qzeros, "from_gptq: qzeros")
    scale, word = _scales(scales, "from_gptq: scales")
    per = 32 // bits
    k, n = words.shape[0] * per, words.shape[1]
    if scale.shape[1] != n or zwords.shape[1] * per != n or zwords.shape[0] != scale.shape[0]:
        raise ValueError(f"from_gptq: qweight {words.shape} (K = {k}, N = {n}), qzeros {zwords.shape} and scales "
                         f"{scale.shape} disagree (qzeros must be (groups, N * bits / 32), scales (groups, N))")
    g = _group(group_size, k, scale.shape[0], "from_gptq")
    if g_idx is not None:
        gi = np.asarray(g_idx.detach().cpu().numpy() if is_torch(g_idx) else g_idx).astype(np.int64)
        if gi.shape != (k,) or not np.array_equal(gi, np.arange(k) // (g or k)):
            raise ValueError("from_gptq: g_idx is not rows // group_size: act-order (desc_act) checkpoints "
                             "permute the rows of K, which this format does not; re-export without act-order "
                             "or permute the activations' columns and the weight's rows first")
    codes = _unpack_columns(words.T, bits, range(per)).T[:k]     # along K: the same bit order
    zero = _unpack_columns(zwords, bits, range(per)).astype(np.float32) + zero_offset
    return _weight(_BITS[bits], g, codes, scale, zero, word)


def from_awq(qweight, qzeros, scales, *, group_size=128, bits: int = 4) -> QuantizedWeight:
    """An AWQ checkpoint's packed layer (GEMM layout, see the module docstring) as a `QuantizedWeight`."""
    if bits != 4:
        raise ValueError(f"from_awq: bits={bits!r}: AWQ's packed layout is 4-bit")
    words = _ints(qweight, "from_awq: qweight")
    zwords = _ints(qzeros, "from_awq: qzeros")
    scale, word = _scales(scales, "from_awq: scales")
    k, n = words.shape[0], words.shape[1] * 8
    if scale.shape != (zwords.shape[0], n) or zwords.shape[1] * 8 != n:
        raise ValueError(f"from_awq: qweight {words.shape} (K = {k}, N = {n}), qzeros {zwords.shape} and scales "
                         f"{scale.shape} disagree (qzeros must be (groups, N / 8), scales (groups, N))")
    g = _group(group_size, k, scale.shape[0], "from_awq")
    codes = _unpack_columns(words, 4, AWQ_ORDER)
    zero = _unpack_columns(zwords, 4, AWQ_ORDER).astype(np.float32)
    return _weight("int4", g, codes, scale, zero, word)


__all__ = ["AWQ_ORDER", "from_awq", "from_gptq"]
