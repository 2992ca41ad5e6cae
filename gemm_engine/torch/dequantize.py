"""Quantized weights expanded by torch's own kernels on the device their words lie on: what the
backward of a quantized product multiplies by (``gx = gy @ W^T``: no quantized kernel reduces
along a weight's output columns) and what `QuantizedLinear.dequantized_weight` returns.

The words are unpacked as quant/codes.py `unpack` does (the same shifts and masks, a word read as
its 32 bits), the codes less their zero points times their scales per group of rows, in float32:
exactly `QuantizedWeight.dequantize`'s values (the difference of a code and a 16-bit zero and its
product with a 16-bit scale each round once in float32 as in float64). On the GPU this replaces
a dequantization on the host and a float32 upload per backward (int4 14336 x 4096: seconds of numpy
and 235 MB through PCIe) with a few elementwise kernels over the packed words.
"""
from __future__ import annotations

import warnings

import torch

from ..quant.format import WeightFormat

#: torch dtypes of the scale words (16-bit bits: quant/codes.py `from_bits16`).
_SCALE_TYPES = {"f16_bits": torch.float16, "bf16_bits": torch.bfloat16}


def _floats(bits: torch.Tensor, word: str) -> torch.Tensor:
    """float32 values of a tensor of 16-bit bits (any 16-bit integer dtype) of ``word``'s type."""
    return bits.view(torch.int16).view(_SCALE_TYPES[word]).float()


def dequantized(packed: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None, fmt: WeightFormat,
                k: int, n: int) -> torch.Tensor:
    """The (..., K, N) float32 values of packed words in ``fmt`` (leading axes: experts) with their
    scales and zeros, on their device (see the module docstring). The codes are written once into
    a float32 tile of whole groups (groups, group, columns), then offset and scaled in place, each
    group's row of scales broadcast (no table per row: at 4096 x 14336 a repeated table is 235 MB)."""
    words = packed.view(torch.int32)     # an arithmetic shift's high bits fall outside the mask
    if fmt.layout == "prepacked":        # (..., strips, word rows, 64) -> (..., word rows, columns)
        words = words.transpose(-3, -2)
        words = words.reshape(*words.shape[:-2], -1)
    lead, (rows, cols), p = words.shape[:-2], words.shape[-2:], fmt.per_word
    group = fmt.group_size or rows * p   # groups are whole words (format.py): they cover the words' rows
    groups = -(-rows * p // group)
    fp8 = fmt.kind == "fp8_e4m3"
    tile = torch.zeros((*lead, groups * group, cols), dtype=torch.uint8 if fp8 else torch.float32,
                       device=words.device)
    codes = tile[..., :rows * p, :].unflatten(-2, (rows, p))
    for j in range(p):
        codes[..., j, :] = (words >> fmt.shift(j)) & fmt.mask
    scale = _floats(scales[..., :groups, :n], fmt.scale).unsqueeze(-2)
    if fp8:
        values = tile[..., :n].view(torch.float8_e4m3fn).float().unflatten(-2, (groups, group)).mul_(scale)
    else:
        values = tile.unflatten(-2, (groups, group))[..., :n]
        if zeros is None:
            values.sub_(float(fmt.implicit_zero))
        else:
            values.sub_(_floats(zeros[..., :groups, :n], fmt.scale).unsqueeze(-2))
        values.mul_(scale)
    return values.flatten(-3, -2)[..., :k, :]


def weight_tensors(weight, device: torch.device, engine=None) -> tuple:
    """(packed, scales, zeros) of a `QuantizedWeight` or `QuantizedExperts` as tensors on ``device``:
    on a CUDA device the engine's own copy (uploaded once and kept: `QuantizedWeight.device`) viewed
    through DLPack, else the host arrays (copied there)."""
    if device.type == "cuda" and engine is not None and engine.runtime.backend == "cuda":
        held = weight.device(engine.runtime)
        return tuple(None if a is None else torch.from_dlpack(a) for a in (held.packed, held.scales, held.zeros))
    with warnings.catch_warnings():      # read-only host arrays: only read here
        warnings.simplefilter("ignore", UserWarning)
        return tuple(None if a is None else torch.from_numpy(a).to(device) for a in (weight.packed, weight.scales,
                                                                                      weight.zeros))


def dequantized_weight(weight, device: torch.device, dtype: torch.dtype, engine=None) -> torch.Tensor:
    """A `QuantizedWeight`'s (K, N) values (a `QuantizedExperts`'s (E, K, N)) in ``dtype`` on ``device``."""
    packed, scales, zeros = weight_tensors(weight, device, engine)
    return dequantized(packed, scales, zeros, weight.format, weight.k, weight.n).to(dtype)
