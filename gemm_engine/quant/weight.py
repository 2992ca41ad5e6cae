"""`QuantizedWeight`: a (K, N) weight held as packed codes with their scales and zeros.

The host arrays are numpy, read-only (a weight never changes after it is made): ``packed`` (the
words of format.py's layout), ``scales`` and ``zeros`` (uint16 bits of the scale dtype, (groups,
N) padded to 16-byte rows). Each engine's runtime gets its own device copy once, on first use
(`device`), kept as long as the weight and the runtime live.

What a weight stands for is `dequantize`: ``(code - zero) * scale`` (int4 / int8) or ``fp8(code) *
scale`` (fp8 e4m3), as float32 (exact: see format.py). Kernels that feed 16-bit tensor-core
fragments use each value rounded once to the activations' 16-bit type (``dequantize(rounded_to=
"bfloat16")`` gives those), register-FMA kernels the float32 values.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, replace

import numpy as np

from .codes import (SCALE_PITCH, WORD_PITCH, fp8_values, from_bits16, pack, round16, round_up, scale_dtype, scale_word,
                    unpack)
from .format import STRIP_COLUMNS, STRIP_ROWS, WeightFormat


@dataclass(frozen=True)
class DeviceWeight:
    """A weight's arrays on one runtime's device and their leading dimensions (elements)."""

    weight: "QuantizedWeight"
    packed: object
    scales: object
    zeros: object | None
    ld: int
    scale_ld: int
    zero_ld: int
    #: Elements from one expert's packed words, scales and zeros to the next's (`QuantizedExperts`).
    strides: tuple = (0, 0, 0)

    @property
    def shape(self) -> tuple[int, int]:
        return self.weight.shape

    @property
    def format(self) -> WeightFormat:
        return self.weight.format


def _readonly(x: np.ndarray, dtype) -> np.ndarray:
    out = np.array(x, dtype=dtype, copy=True, order="C")
    out.flags.writeable = False
    return out


class QuantizedWeight:
    """Packed codes, scales and zeros of a (K, N) weight in matmul's ``b`` orientation (see the
    module docstring). Made by `gemm_engine.quantize`, `from_gptq`, `from_awq` or from arrays
    already in this layout (``QuantizedWeight(format, k, n, packed, scales, zeros)``)."""

    def __init__(self, format: WeightFormat, k: int, n: int, packed, scales, zeros=None):
        if not isinstance(format, WeightFormat):
            raise TypeError(f"QuantizedWeight: format must be a WeightFormat, got {type(format).__name__}")
        if not (isinstance(k, int) and isinstance(n, int) and k > 0 and n > 0):
            raise ValueError(f"QuantizedWeight: K and N must be positive ints, got {k!r}, {n!r}")
        fmt = format
        packed, scales = np.asarray(packed), np.asarray(scales)
        kw = -(-k // fmt.per_word)
        if fmt.layout == "prepacked":
            want = (-(-n // STRIP_COLUMNS), round_up(kw, STRIP_ROWS), STRIP_COLUMNS)
            if packed.shape != want:
                raise ValueError(f"QuantizedWeight: prepacked words of a {k} x {n} {fmt.kind} weight have shape "
                                 f"{want}, got {packed.shape}")
        elif packed.ndim != 2 or packed.shape[0] != kw or packed.shape[1] < n or packed.shape[1] % WORD_PITCH:
            raise ValueError(f"QuantizedWeight: k_packed words of a {k} x {n} {fmt.kind} weight have shape ({kw}, "
                             f"N padded to a multiple of {WORD_PITCH}), got {packed.shape}")
        groups = fmt.groups(k)
        for name, x in (("scales", scales), ("zeros", zeros)):
            if x is None:
                continue
            x = np.asarray(x)
            if x.dtype != np.uint16 or x.ndim != 2 or x.shape[0] != groups or x.shape[1] < n \
                    or x.shape[1] % SCALE_PITCH:
                raise ValueError(f"QuantizedWeight: {name} must be uint16 bits of shape ({groups}, N padded to a "
                                 f"multiple of {SCALE_PITCH}), got {x.dtype} {x.shape}")
        if (zeros is not None) != fmt.zeros:
            raise ValueError(f"QuantizedWeight: format says zeros={fmt.zeros}, but zeros "
                             f"{'were' if zeros is not None else 'were not'} given")
        if zeros is not None:
            z = from_bits16(np.asarray(zeros)[:, :n], fmt.scale)
            if not (np.all(z == np.round(z)) and np.all(z >= 0) and np.all(z <= 1 << fmt.bits)):
                raise ValueError(f"QuantizedWeight: zero points must be whole numbers in [0, {1 << fmt.bits}] (the "
                                 f"kernels subtract them exactly)")
        scale_values = from_bits16(scales[:, :n], fmt.scale)
        if not np.all(np.isfinite(scale_values)):
            raise ValueError("QuantizedWeight: scales must be finite")
        self.format, self.k, self.n = fmt, k, n
        self.packed = _readonly(packed, np.uint32)
        self.scales = _readonly(scales, np.uint16)
        self.zeros = None if zeros is None else _readonly(zeros, np.uint16)
        self._device: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: ``source(runtime)``: the packed words, scales and zeros already on ``runtime``'s device (a
        #: module's buffers: torch/quantized_linear.py), or None there: then they are uploaded.
        self.device_source = None

    # -- what it stands for ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.k, self.n)

    @property
    def T(self) -> "QuantizedWeight":
        """This weight read transposed: the (N, K) ``b`` of ``x @ W^T``, made once and kept; its
        ``T`` is this weight again (`TransposedQuantizedWeight`)."""
        view = self.__dict__.get("_transposed")
        if view is None:
            view = self._transposed = TransposedQuantizedWeight(self)
        return view

    @property
    def scale_dtype(self) -> np.dtype:
        return scale_dtype(self.format.scale)

    def codes(self) -> np.ndarray:
        """The (K, N) uint8 codes."""
        return unpack(self.packed, self.format, self.k, self.n)

    def _per_row(self, table: np.ndarray) -> np.ndarray:
        """A (groups, N) table repeated to one row per row of K."""
        g = self.format.group_size or self.k
        return np.repeat(table, g, axis=0)[: self.k]

    def scale_values(self) -> np.ndarray:
        """The (groups, N) float32 scales."""
        return from_bits16(self.scales[:, : self.n], self.format.scale)

    def zero_values(self) -> np.ndarray:
        """The (groups, N) float32 zero points (the implicit zero where the format has none)."""
        if self.zeros is None:
            return np.full((self.format.groups(self.k), self.n), self.format.implicit_zero, np.float32)
        return from_bits16(self.zeros[:, : self.n], self.format.scale)

    def dequantize(self, rounded_to=None) -> np.ndarray:
        """The (K, N) float32 values the weight stands for; ``rounded_to`` ("float16" /
        "bfloat16"): each rounded once to that type, as a 16-bit fragment holds it."""
        codes = self.codes()
        scale = self._per_row(self.scale_values()).astype(np.float64)
        if self.format.kind == "fp8_e4m3":
            values = fp8_values(codes).astype(np.float64) * scale
        else:
            values = (codes.astype(np.float64) - self._per_row(self.zero_values())) * scale
        values = values.astype(np.float32)
        return values if rounded_to is None else round16(values, scale_word(rounded_to))

    # -- layouts -----------------------------------------------------------------------------------
    def prepack(self) -> "QuantizedWeight":
        """The same weight in the prepacked layout (format.py): strips of 64 columns whose word rows
        are contiguous, codes of row pairs in separate halves of a word. The decode kernel streams
        it as one 1 KiB run per plane and step; every kernel reads either layout."""
        if self.format.layout == "prepacked":
            return self
        fmt = WeightFormat(self.format.kind, self.format.group_size, self.format.zeros, self.format.scale,
                           "prepacked")
        return QuantizedWeight(fmt, self.k, self.n, pack(self.codes(), fmt), self.scales, self.zeros)

    @property
    def ld(self) -> int:
        """The packed words' leading dimension (a k_packed row's pitch; 64 in a prepacked strip)."""
        return STRIP_COLUMNS if self.format.layout == "prepacked" else self.packed.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes a kernel streams: the packed words of the K x N codes, the scales and zeros."""
        kw = -(-self.k // self.format.per_word)
        tables = (1 + (self.zeros is not None)) * self.format.groups(self.k) * self.n * 2
        return kw * self.n * 4 + tables

    # -- on a device -------------------------------------------------------------------------------
    def device(self, runtime) -> DeviceWeight:
        """This weight's arrays on ``runtime``'s device (uploaded on first use, then kept)."""
        return kept_on_device(self, runtime, self._device, self._lock)

    def __repr__(self) -> str:
        f = self.format
        group = f"group_size={f.group_size}" if f.group_size else "per-channel"
        return (f"QuantizedWeight({f.kind}, K={self.k}, N={self.n}, {group}, "
                f"{'asymmetric' if f.zeros else 'symmetric'}, scales={self.scale_dtype.name}, {f.layout})")


def kept_on_device(weight, runtime, copies, lock, experts: bool = False) -> DeviceWeight:
    """``weight``'s arrays (a `QuantizedWeight`, or ``experts``: stacked experts' with one more
    leading axis) on ``runtime``'s device, uploaded on first use (under ``lock``; or the arrays its
    ``device_source`` holds there already) and kept in ``copies`` (the weight's, by runtime,
    weakly) while both live."""
    found = copies.get(runtime)
    if found is None:
        with lock:
            found = copies.get(runtime)
            if found is None:
                packed, scales, zeros = weight.packed, weight.scales, weight.zeros
                held = weight.device_source(runtime) if weight.device_source is not None else None
                arrays = held or [None if x is None else runtime.upload(x) for x in (packed, scales, zeros)]
                step = (lambda x: x[0].size if experts else 0)
                found = DeviceWeight(weight, *arrays, weight.ld, scales.shape[-1],
                                     zeros.shape[-1] if zeros is not None else 0,
                                     (step(packed), step(scales), 0 if zeros is None else step(zeros)))
                # Uploaded once and read by kernels on any stream or queue: complete before first use.
                runtime.synchronize()
                copies[runtime] = found
    return found


__all__ = ["DeviceWeight", "QuantizedWeight", "kept_on_device"]


class TransposedQuantizedWeight(QuantizedWeight):
    """``weight.T``: the (N, K) operand ``b`` of products such as a backward pass's ``gy @ W^T`` (the
    input's gradient of ``x @ W``); ``shape`` (N, K), ``k`` and ``n`` the stored weight's, as its
    arrays are. Made by `QuantizedWeight.T`, not directly.

    It shares W's packed words, scales and zeros, on the host and on each device (a module's buffers
    included: `QuantizedWeight.device`); only its format differs (`WeightFormat.transposed`). The
    levels that stream packed words along K would read them along the product's N, which none
    does: they refuse it (global_/base.py `check_weights`). The dequantizing pass
    (batch/dequantize_first.py) writes W's values once per call as it always does, and the dense
    kernel after it reads that copy as the row-major (N, K) ``b`` it is: W^T costs what W costs on
    that path."""

    def __init__(self, weight: QuantizedWeight):       # its arrays were checked when it was made
        self.base = weight
        self.format = replace(weight.format, transposed=True)
        self.k, self.n = weight.k, weight.n
        self.packed, self.scales, self.zeros = weight.packed, weight.scales, weight.zeros
        self._device: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.device_source = None                      # the stored weight's copies serve (`device`)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.k)

    @property
    def T(self) -> QuantizedWeight:
        return self.base

    def codes(self) -> np.ndarray:
        return self.base.codes().T

    def dequantize(self, rounded_to=None) -> np.ndarray:
        return self.base.dequantize(rounded_to).T

    def prepack(self) -> QuantizedWeight:
        return self.base.prepack().T

    def device(self, runtime) -> DeviceWeight:
        return replace(self.base.device(runtime), weight=self)

    def __repr__(self) -> str:
        return f"{self.base!r}.T"
