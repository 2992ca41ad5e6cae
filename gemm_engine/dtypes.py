"""Element types the engine computes with, independent of backend.

Each `ElementType` names how an element is stored in global memory (`storage`), the type the tile
level multiplies and accumulates in (`compute`), and which conversion the dialect must render when
an element is read or written. Storage names are neutral (`f16_bits` is 16 raw bits); the dialect
maps them to C types, so neither CUDA headers nor `cl_khr_fp16` are needed for half precision.

Integers: int8 operands are multiplied and accumulated exactly in 32-bit integers (compute word
`i32`) and give an int32 result, a GEMM library's contract rather than numpy's (whose int8 @ int8
wraps around in int8): `WIDENED` names that result type. int32 exists as a *result* type only;
other integer inputs are refused (`SUPPORTED_NAMES` lists the input dtypes).
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
WORD_BYTES = {"f32": 4, "f64": 8, "f16_bits": 2, "bf16_bits": 2, "i8": 1, "i32": 4}

FLOAT32 = ElementType("float32", "f32", "f32", 4)
FLOAT64 = ElementType("float64", "f64", "f64", 8)
FLOAT16 = ElementType("float16", "f16_bits", "f32", 2)
BFLOAT16 = ElementType("bfloat16", "bf16_bits", "f32", 2)
INT8 = ElementType("int8", "i8", "i32", 1)
INT32 = ElementType("int32", "i32", "i32", 4)   # the result of int8 x int8 (not an input dtype)

#: Every element type a kernel reads or writes, by name.
BY_NAME = {t.name: t for t in (FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT8, INT32)}
#: The operand dtypes `matmul` accepts (int32 is only ever a result).
SUPPORTED_NAMES = ("float32", "float64", "float16", "bfloat16", "int8")
#: Operand dtype -> result dtype where a product of two such operands is wider than they are:
#: int8 x int8 accumulates and returns int32, exact (numpy would wrap around in int8).
WIDENED = {np.dtype(np.int8): np.dtype(np.int32)}


def bfloat16_dtype():
    """numpy's dtype for bfloat16 (from ml_dtypes, which CuPy and JAX use too), or None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


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


_BY_DTYPE = {np.dtype(name): et for name, et in BY_NAME.items() if name != "bfloat16"}
if bfloat16_dtype() is not None:
    _BY_DTYPE[bfloat16_dtype()] = BFLOAT16


def operand_dtype(result) -> np.dtype:
    """The dtype a kernel reads its operands in for a result of dtype ``result``: the result's
    own, except int32, which only int8 x int8 gives (`WIDENED`; int32 operands are refused)."""
    result = np.dtype(result)
    return _OPERAND_OF.get(result, result)


_OPERAND_OF = {result: operand for operand, result in WIDENED.items()}


def numpy_dtype(et: ElementType) -> np.dtype:
    if et is BFLOAT16:
        dt = bfloat16_dtype()
        if dt is None:
            raise TypeError("bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
        return dt
    return np.dtype(et.name)
