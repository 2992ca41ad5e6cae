"""Host-side bit work of quantized weights (numpy): codes packed into 32-bit words along K in the
layouts of format.py and back, and the 16-bit and fp8 encodings of scales, zeros and codes."""
from __future__ import annotations

import numpy as np

from ..dtypes import ml_dtype
from .format import STRIP_COLUMNS, STRIP_ROWS, WeightFormat

#: Row pitch multiples (elements) of the packed words and of the scales: 16-byte rows.
WORD_PITCH, SCALE_PITCH = 4, 8

_SCALE_DTYPES = {"float16": "f16_bits", "bfloat16": "bf16_bits"}


def round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def scale_word(dtype) -> str:
    """The storage word of a 16-bit float dtype given by name or dtype ("float16", "bfloat16")."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _SCALE_DTYPES:
        raise ValueError(f"scale_dtype: expected float16 or bfloat16, got {name!r}")
    return _SCALE_DTYPES[name]


def scale_dtype(word: str) -> np.dtype:
    """numpy's dtype of a scale word (bfloat16 needs ml_dtypes)."""
    if word == "f16_bits":
        return np.dtype(np.float16)
    dt = ml_dtype("bfloat16")
    if dt is None:
        raise TypeError("bfloat16 scales need the ml_dtypes package (pip install ml_dtypes)")
    return dt


def to_bits16(values, word: str) -> np.ndarray:
    """float values rounded (to nearest even) to the 16-bit type of ``word``, as uint16 bits."""
    return np.ascontiguousarray(np.asarray(values, np.float32).astype(scale_dtype(word))).view(np.uint16)


def from_bits16(bits: np.ndarray, word: str) -> np.ndarray:
    """float32 values of uint16 bits of the 16-bit type of ``word``."""
    return np.asarray(bits, np.uint16).view(scale_dtype(word)).astype(np.float32)


def round16(values, word: str) -> np.ndarray:
    """float32 values rounded once to the 16-bit type of ``word`` (what a 16-bit fragment holds)."""
    return from_bits16(to_bits16(values, word), word)


def round16_up(values, word: str) -> np.ndarray:
    """Positive float values rounded up to the 16-bit type of ``word`` (a scale that still spans
    its range after rounding)."""
    v = np.asarray(values, np.float32)
    bits = to_bits16(v, word)
    bits = np.where(from_bits16(bits, word) < v, bits + np.uint16(1), bits).astype(np.uint16)
    return from_bits16(bits, word)


def _fp8():
    dt = ml_dtype("float8_e4m3fn")
    if dt is None:
        raise TypeError("fp8 weights need the ml_dtypes package (pip install ml_dtypes)")
    return dt


def fp8_codes(values) -> np.ndarray:
    """float values (within +-448) rounded to nearest-even fp8 e4m3, as uint8 bits."""
    v = np.clip(np.asarray(values, np.float32), -448.0, 448.0)
    return np.ascontiguousarray(v.astype(_fp8())).view(np.uint8)


def fp8_values(codes) -> np.ndarray:
    """float32 values of fp8 e4m3 bits."""
    return np.asarray(codes, np.uint8).view(_fp8()).astype(np.float32)


def pack(codes: np.ndarray, fmt: WeightFormat) -> np.ndarray:
    """(K, N) codes (each < 2^bits) as the packed words of ``fmt``'s layout: k_packed a (ceil(K /
    per_word), round_up(N, 4)) array, prepacked a (strips, word rows, 64) array; codes past K and
    N are 0."""
    codes = np.asarray(codes)
    k, n = codes.shape
    p, bits = fmt.per_word, fmt.bits
    if codes.size and int(codes.max()) > fmt.mask:
        raise ValueError(f"codes above {fmt.mask} do not fit {bits} bits")
    kw = -(-k // p)
    if fmt.layout == "prepacked":
        rows, cols = round_up(kw, STRIP_ROWS), round_up(n, STRIP_COLUMNS)
    else:
        rows, cols = kw, round_up(n, WORD_PITCH)
    full = np.zeros((rows * p, cols), np.uint32)
    full[:k, :n] = codes
    blocks = full.reshape(rows, p, cols)
    words = np.zeros((rows, cols), np.uint32)
    for j in range(p):
        words |= blocks[:, j, :] << np.uint32(fmt.shift(j))
    if fmt.layout == "prepacked":
        return np.ascontiguousarray(words.reshape(rows, cols // STRIP_COLUMNS, STRIP_COLUMNS).transpose(1, 0, 2))
    return words


def unpack(words: np.ndarray, fmt: WeightFormat, k: int, n: int) -> np.ndarray:
    """The (K, N) uint8 codes of packed words (the inverse of `pack`)."""
    words = np.asarray(words, np.uint32)
    if fmt.layout == "prepacked":
        strips, rows, cols = words.shape
        words = words.transpose(1, 0, 2).reshape(rows, strips * cols)
    rows, cols = words.shape
    out = np.empty((rows, fmt.per_word, cols), np.uint8)
    for j in range(fmt.per_word):
        out[:, j, :] = (words >> np.uint32(fmt.shift(j))) & np.uint32(fmt.mask)
    return out.reshape(rows * fmt.per_word, cols)[:k, :n]


def pad_columns(x: np.ndarray, multiple: int) -> np.ndarray:
    """A 2-D array with its columns padded by zeros to a multiple of ``multiple``, contiguous."""
    rows, cols = x.shape
    out = np.zeros((rows, round_up(cols, multiple)), x.dtype)
    out[:, :cols] = x
    return out


__all__ = ["SCALE_PITCH", "WORD_PITCH", "fp8_codes", "fp8_values", "from_bits16", "pack", "pad_columns", "round16",
           "round16_up", "round_up", "scale_dtype", "scale_word", "to_bits16", "unpack"]
