"""Element types the engine computes with, independent of backend.

Each `ElementType` names how an element is stored in global memory (`storage`), the type the tile
level multiplies and accumulates in (`compute`), and which conversion the dialect must render when
an element is read or written. Storage names are neutral (`f16_bits` is 16 raw bits); the dialect
maps them to C types, so neither CUDA headers nor `cl_khr_fp16` are needed for half precision.

Integers: int8 operands are multiplied and accumulated exactly in 32-bit integers (compute word
`i32`) and give an int32 result, a GEMM library's contract rather than numpy's (whose int8 @ int8
wraps around in int8): `WIDENED` names that result type. int32 exists as a *result* type only;
other integer inputs are refused (`SUPPORTED_NAMES` lists the input dtypes).

fp8: ``float8_e4m3fn`` and ``float8_e5m2`` (ml_dtypes' types; torch's float8 tensors) are operand
types only. Their product is float32 (`WIDENED`, as cuBLASLt's and torch._scaled_mm's), computed
from the exact fp8 values; the two kinds mix (e4m3 x e5m2, `FP8_NAMES`). Like bfloat16 they move
between libraries as their bits (`bits_dtype`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementType:
    name: str       # numpy-style name: "float32", "bfloat16", ...
    storage: str    # neutral storage word the dialect maps: f32, f64, f16_bits, bf16_bits, i8, i32
    compute: str    # neutral compute word: f32, f64 or i32
    itemsize: int


#: Bytes of each neutral element word (storage and compute words alike).
WORD_BYTES = {"f32": 4, "f64": 8, "f16_bits": 2, "bf16_bits": 2, "i8": 1, "i32": 4, "f8e4m3": 1,
              "f8e5m2": 1, "u32": 4}

FLOAT32 = ElementType("float32", "f32", "f32", 4)
FLOAT64 = ElementType("float64", "f64", "f64", 8)
FLOAT16 = ElementType("float16", "f16_bits", "f32", 2)
BFLOAT16 = ElementType("bfloat16", "bf16_bits", "f32", 2)
INT8 = ElementType("int8", "i8", "i32", 1)
INT32 = ElementType("int32", "i32", "i32", 4)   # the result of int8 x int8 (not an input dtype)
FLOAT8_E4M3 = ElementType("float8_e4m3fn", "f8e4m3", "f32", 1)
FLOAT8_E5M2 = ElementType("float8_e5m2", "f8e5m2", "f32", 1)
#: Packed quantized weights (gemm_engine/quant): 32-bit words of several codes each, never a
#: user dtype (not in `BY_NAME`); what a kernel's rhs parameter holds for a quantized problem.
PACKED_WORDS = ElementType("packed_u32", "u32", "f32", 4)

#: Every element type a kernel reads or writes, by name.
BY_NAME = {t.name: t for t in (FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT8, INT32, FLOAT8_E4M3, FLOAT8_E5M2)}
#: The fp8 operand types (operands only: never a result).
FP8_NAMES = ("float8_e4m3fn", "float8_e5m2")
#: The operand dtypes `matmul` accepts (int32 is only ever a result).
SUPPORTED_NAMES = ("float32", "float64", "float16", "bfloat16", "int8") + FP8_NAMES
#: Types held in numpy only through ml_dtypes, by name.
_ML_DTYPES = ("bfloat16",) + FP8_NAMES


def ml_dtype(name: str):
    """numpy's dtype for one of ml_dtypes' types ("bfloat16", "float8_e4m3fn", ...; the package
    CuPy and JAX use too), or None without ml_dtypes."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(getattr(ml_dtypes, name))


def bfloat16_dtype():
    """numpy's dtype for bfloat16, or None."""
    return ml_dtype("bfloat16")


#: Operand dtype -> result dtype where a product of two such operands is wider than they are:
#: int8 x int8 accumulates and returns int32, exact (numpy would wrap around in int8); fp8 x fp8
#: returns float32.
WIDENED = {np.dtype(np.int8): np.dtype(np.int32)}
WIDENED.update({ml_dtype(n): np.dtype(np.float32) for n in FP8_NAMES if ml_dtype(n) is not None})


def is_fp8(dtype) -> bool:
    try:
        return np.dtype(dtype).name in FP8_NAMES
    except TypeError:
        return False


def bits_dtype(dtype) -> np.dtype | None:
    """The unsigned integer dtype a type moves as where a device library may lack it (bfloat16:
    uint16, fp8: uint8), or None for types every library has."""
    name = np.dtype(dtype).name
    if name == "bfloat16":
        return np.dtype(np.uint16)
    if name in FP8_NAMES:
        return np.dtype(np.uint8)
    return None


def element_type(dtype) -> ElementType:
    """The ElementType of a numpy-compatible dtype, or TypeError naming what is supported."""
    found = _BY_DTYPE.get(dtype)  # the per-call path: a dict hit for the dtypes we know
    if found is not None:
        return found
    name = np.dtype(dtype).name
    if name not in BY_NAME:
        raise TypeError(
            f"gemm_engine.matmul: unsupported dtype {name!r}; supported dtypes are "
            f"{', '.join(SUPPORTED_NAMES)}"
        )
    return BY_NAME[name]


_BY_DTYPE = {np.dtype(name): et for name, et in BY_NAME.items() if name not in _ML_DTYPES}
for _name in _ML_DTYPES:
    if ml_dtype(_name) is not None:
        _BY_DTYPE[ml_dtype(_name)] = BY_NAME[_name]


def operand_dtypes(a_dtype, b_dtype, product) -> tuple[np.dtype, np.dtype]:
    """The dtypes a kernel reads its operands in for operands of ``a_dtype`` and ``b_dtype`` whose
    product is ``product``: each its own where the product widens them (int8, fp8: `WIDENED`),
    else both the product's (numpy's promotion)."""
    a, b = np.dtype(a_dtype), np.dtype(b_dtype)
    if a in WIDENED and b in WIDENED and WIDENED[a] == WIDENED[b] == product:
        return a, b
    return np.dtype(product), np.dtype(product)


def numpy_dtype(et: ElementType) -> np.dtype:
    if et.name in _ML_DTYPES:
        dt = ml_dtype(et.name)
        if dt is None:
            raise TypeError(f"{et.name} needs the ml_dtypes package (pip install ml_dtypes)")
        return dt
    return np.dtype(et.name)


def device_dtype(et: ElementType) -> np.dtype:
    """The numpy dtype a device library holds elements of ``et`` in: its own, or its bits
    (bfloat16, fp8: `bits_dtype`)."""
    dt = numpy_dtype(et)
    bits = bits_dtype(dt)
    return dt if bits is None else bits
