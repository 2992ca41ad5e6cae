"""argparse types of the command lines (``gemm-engine`` and the benchmark suite's): each turns a
bad value into a one-line usage error (exit status 2) before anything runs. One dtype-name parser
(`dtype_name`, with `DTYPE_ALIASES`) serves every sub-command."""
from __future__ import annotations

import argparse

import numpy as np

from ..dtypes import FP8_NAMES, SUPPORTED_NAMES, bfloat16_dtype, ml_dtype

#: Every dtype name a command line takes: the engine's input dtypes and "tf32" (float32 data run
#: with precision="tf32").
DTYPE_NAMES = SUPPORTED_NAMES + ("tf32",)
#: Short spellings, accepted wherever a command line takes a dtype (``run --dtype``, ``tune
#: --dtypes``, ``bench --dtypes``, ...), so that every sub-command reads the same names.
DTYPE_ALIASES = {"f32": "float32", "fp32": "float32", "single": "float32",
                 "f64": "float64", "fp64": "float64", "double": "float64",
                 "f16": "float16", "fp16": "float16", "half": "float16",
                 "bf16": "bfloat16", "i8": "int8",
                 "e4m3": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn",
                 "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2"}


def _integer(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        what = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def count(text: str) -> int:
    """Sizes and counts: a positive integer."""
    return _integer(text, 1)


def counts(text: str) -> tuple[int, ...]:
    """A comma list of positive integers (--tokens)."""
    return tuple(count(item.strip()) for item in text.split(","))


def nonnegative(text: str) -> int:
    """A count that may be zero (warm-up calls)."""
    return _integer(text, 0)


def layout_pair(text: str):
    """--layouts: two of row/col -> (Layout, Layout)."""
    from ..problem import Layout
    try:
        lhs, rhs = (Layout(x.strip()) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected two of row/col, e.g. row,col; got {text!r}") from None
    return lhs, rhs


def arch(text: str) -> str:
    """argparse type of --arch: sm_XY (or sm_XYa)."""
    digits = text.lower().removeprefix("sm_").rstrip("a")
    if not digits.isdigit() or len(digits) < 2:
        raise argparse.ArgumentTypeError(f"expected e.g. sm_80 or sm_90, got {text!r}")
    return text


def shapes(text: str) -> list[tuple[int, int, int, int]]:
    """argparse type of --shapes: 'MxNxK' or 'BxMxNxK', comma-separated -> [(batch, m, n, k)]."""
    out = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) not in (3, 4) or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"expected MxNxK or BxMxNxK items of positive sizes, got {item!r}")
        sizes = [int(p) for p in parts]
        out.append(tuple(sizes) if len(sizes) == 4 else (1, *sizes))
    return out


def dtype_name(text: str, allowed=DTYPE_NAMES) -> str:
    """A dtype name or alias -> the name the engine uses (``f16`` -> ``float16``); one of ``allowed``."""
    name = text.strip().lower()
    name = DTYPE_ALIASES.get(name, name)
    if name not in allowed:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; expected one of {', '.join(allowed)} "
                                         f"(or {', '.join(DTYPE_ALIASES)})")
    return name


def dtype_names(text: str) -> list[str]:
    """A comma list of dtype names or aliases -> the engine's names, in order, without repeats."""
    names = [dtype_name(item) for item in text.split(",") if item.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma list of dtypes, got {text!r}")
    return list(dict.fromkeys(names))


def dtype_and_precision(name: str, precision: str) -> tuple[str, str]:
    """A command line's dtype name -> (the operands' dtype, precision): "tf32" is float32 data run
    with precision="tf32", as the benchmark suite names it."""
    return ("float32", "tf32") if name == "tf32" else (name, precision)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of an engine dtype name (bfloat16 and fp8 through ml_dtypes)."""
    if name == "bfloat16":
        return bfloat16_dtype()
    return ml_dtype(name) if name in FP8_NAMES else np.dtype(name)
