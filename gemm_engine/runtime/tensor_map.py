"""TMA tensor maps: the 128-byte descriptors the bulk tensor copy engine reads, encoded on the host.

A tensor map describes one operand in global memory (its address, extents and byte strides, up to
5 dimensions, innermost first) and the *box* one copy moves into shared memory, with the shared
layout's swizzle. Kernels take it by value as a ``__grid_constant__`` parameter
(codegen/signature.py's ``by_value``).

Encoding is NVIDIA's ``cuTensorMapEncodeTiled`` through the ``cuda-bindings`` package (NVIDIA's own
Python binding of the driver API, installed with CUDA 12.8+ / 13 Python stacks): CuPy 14 does not
expose the call, and a hand-written ctypes prototype of a 12-argument driver function would be one
more thing to keep right by hand. A map holds the operand's address, so it is encoded per call; the
same arrays come back call after call (training loops, benchmarks, caching allocators), so encoded
maps are kept in a small least-recently-used cache keyed by everything that determines them.

TMA's own rules, checked by the components that ask for maps (global_/read/tma_loader.py) before any
launch: the address 16-byte aligned, every stride but the innermost a multiple of 16 bytes below
2^40, extents in [1, 2^32], box extents in [1, 256] with the innermost box row at most the swizzle
span (128 bytes for the 128-byte swizzle).
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from dataclasses import dataclass

MAP_BYTES = 128
MAP_ALIGN = 64
#: Element storage word -> CUtensorMapDataType name.
_DATA_TYPES = {"f16_bits": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16_bits": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
               "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
               "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
               # fp8 moves as bytes: TMA only copies them
               "f8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "f8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}
_CACHE_MAX = 256
#: L2 promotion span in bytes -> CUtensorMapL2promotion name.
_PROMOTIONS = {0: "CU_TENSOR_MAP_L2_PROMOTION_NONE", 64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
               128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", 256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}


@dataclass(frozen=True)
class TensorMapSpec:
    """Everything but the address: element word, extents and byte strides (innermost first; the
    innermost stride is the element size, implied), the box, the swizzle span and the L2 promotion
    (the span L2 fetches for a request: 0, 64, 128 or 256 bytes; the loader chooses it)."""

    word: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]          # bytes, for dims[1:]
    box: tuple[int, ...]
    swizzle: int = 128
    l2_promotion: int = 256


class TensorMapEncoder:
    """Encodes tensor maps (``bytes`` of 128) for one process; thread-safe, cached."""

    def __init__(self):
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self._driver = None

    def driver(self):
        if self._driver is None:
            try:
                from cuda.bindings import driver
            except ImportError as exc:   # pragma: no cover - depends on the machine
                raise RuntimeError("TMA tensor maps need NVIDIA's cuda-bindings package "
                                   "(pip install cuda-bindings)") from exc
            self._driver = driver
        return self._driver

    def encode(self, address: int, spec: TensorMapSpec) -> bytes:
        key = (address, spec)
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        data = self._encode(address, spec)
        with self._lock:
            self._cache[key] = data
            if len(self._cache) > _CACHE_MAX:
                self._cache.popitem(last=False)
        return data

    def _encode(self, address: int, spec: TensorMapSpec) -> bytes:
        drv = self.driver()
        rank = len(spec.dims)
        u64, u32 = drv.cuuint64_t, drv.cuuint32_t     # the binding takes its own integer types
        swizzle = {128: "CU_TENSOR_MAP_SWIZZLE_128B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
                   32: "CU_TENSOR_MAP_SWIZZLE_32B", 0: "CU_TENSOR_MAP_SWIZZLE_NONE"}[spec.swizzle]
        err, tmap = drv.cuTensorMapEncodeTiled(
            getattr(drv.CUtensorMapDataType, _DATA_TYPES[spec.word]), rank, address,
            [u64(x) for x in spec.dims], [u64(x) for x in spec.strides], [u32(x) for x in spec.box],
            [u32(1)] * rank,
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(drv.CUtensorMapSwizzle, swizzle),
            getattr(drv.CUtensorMapL2promotion, _PROMOTIONS[spec.l2_promotion]),
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if int(err) != 0:
            raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err}) for address {address:#x}, {spec}")
        return ctypes.string_at(tmap.getPtr(), MAP_BYTES)


ENCODER = TensorMapEncoder()


def readdressed(maps: list, old: tuple, new: tuple) -> list | None:
    """``maps`` (by-value parameters derived for the addresses ``old``) for the addresses ``new``, by
    rewriting each tensor map's global address (its first 8 bytes, little-endian, as the driver
    encodes it; the caller checks that once per plan against a full encode), or None where that
    cannot be told: a map whose address is not exactly one of ``old``'s (or is one shared by
    arrays that ``new`` moves apart), a new address not 16-byte aligned, or an all-zero map (a
    call TMA could not address) where an address's alignment changed. Why: a call on arrays at
    new addresses (a model's activations, every layer's own) would otherwise encode three maps
    through cuda-bindings and rebuild their specs, about 60 us of host time on the H100 host."""
    out = []
    for data in maps:
        if type(data) is not bytes or len(data) != MAP_BYTES:
            return None
        address = int.from_bytes(data[:8], "little")
        if address == 0 and not any(data):
            if any(x % 16 != y % 16 for x, y in zip(old, new)):
                return None
            out.append(data)
            continue
        moved = {y for x, y in zip(old, new) if x == address}
        if len(moved) != 1:
            return None
        target = moved.pop()
        if target % 16:
            return None
        out.append(target.to_bytes(8, "little") + data[8:])
    return out
