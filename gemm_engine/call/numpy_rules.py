"""numpy's matmul semantics, on shapes, strides and dtypes only (no device, no launch).

Everything a call can get wrong is checked here, before any data moves: operand ranks, the core
dimension, broadcast of batch dimensions, dtypes, and ``out``. The messages follow numpy's.

The result dtype is numpy's with one deliberate exception: int8 @ int8 gives int32 (exact 32-bit
accumulation, a GEMM library's contract; numpy wraps around in int8). See `result_dtype`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..dtypes import SUPPORTED_NAMES, WIDENED, element_type, is_fp8
from ..problem import Layout

_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"


@dataclass(frozen=True)
class CallShape:
    """The shape side of one matmul call after numpy's rules."""

    batch_shape: tuple[int, ...]
    m: int
    n: int
    k: int
    out_shape: tuple[int, ...]
    lhs_vector: bool    # lhs was 1-D: a row of length k was prepended a 1 and is removed again
    rhs_vector: bool

    @property
    def batch(self) -> int:
        return math.prod(self.batch_shape)


def call_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> CallShape:
    for i, shape in enumerate((a_shape, b_shape)):
        if len(shape) == 0:
            raise ValueError(f"matmul: Input operand {i} does not have enough dimensions "
                             f"(has 0, gufunc core with signature {_SIGNATURE} requires 1)")
    lhs_vector, rhs_vector = len(a_shape) == 1, len(b_shape) == 1
    a2 = (1,) + tuple(a_shape) if lhs_vector else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if rhs_vector else tuple(b_shape)
    m, k = a2[-2:]
    k2, n = b2[-2:]
    if k != k2:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                         f"signature {_SIGNATURE} (size {k2} is different from {k})")
    try:
        batch_shape = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise ValueError(f"matmul: operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {tuple(a_shape)}->{a2} {tuple(b_shape)}->{b2}") from None
    out_shape = batch_shape + (() if lhs_vector else (m,)) + (() if rhs_vector else (n,))
    return CallShape(batch_shape, int(m), int(n), int(k), out_shape, lhs_vector, rhs_vector)


def result_dtype(a_dtype, b_dtype) -> np.dtype:
    """numpy's result dtype, if both operands and the result are types the engine computes.

    One deliberate deviation from numpy: int8 @ int8 is int32 (`dtypes.WIDENED`), accumulated
    exactly in 32-bit integers, as GEMM libraries do; numpy's result is int8, wrapped around. int8
    with a float operand follows numpy's promotion (the float type, which holds int8 exactly).
    fp8 @ fp8 (either kind, mixed too) is float32; fp8 with any other type is refused.
    """
    if a_dtype == b_dtype:
        if a_dtype in _KNOWN:
            return np.dtype(a_dtype)  # the common case, without numpy's promotion machinery
        if a_dtype in WIDENED:
            return WIDENED[a_dtype]
    for i, dt in enumerate((a_dtype, b_dtype)):
        if np.dtype(dt).name not in SUPPORTED_NAMES:
            raise TypeError(f"matmul: operand {i} has unsupported dtype {np.dtype(dt).name!r}; "
                            f"supported dtypes are {', '.join(SUPPORTED_NAMES)}")
    fp8 = [is_fp8(dt) for dt in (a_dtype, b_dtype)]
    if all(fp8):
        return np.dtype(np.float32)          # e4m3 x e5m2: float32, as each kind with itself
    if any(fp8):
        raise TypeError(f"matmul: an fp8 operand multiplies only with an fp8 operand (float8_e4m3fn or "
                        f"float8_e5m2), got {np.dtype(a_dtype).name} and {np.dtype(b_dtype).name}; "
                        f"convert the other first")
    if np.dtype(a_dtype) == np.dtype(b_dtype) and np.dtype(a_dtype) in WIDENED:
        return WIDENED[np.dtype(a_dtype)]   # given as scalar types (np.int8), not dtypes
    try:
        dt = np.result_type(a_dtype, b_dtype)
    except Exception as exc:  # numpy's DTypePromotionError (bfloat16 with float16, say)
        raise TypeError(f"matmul: no common dtype for {np.dtype(a_dtype).name} and "
                        f"{np.dtype(b_dtype).name}") from exc
    element_type(dt)  # raises TypeError for anything we cannot compute in
    return dt


_KNOWN = {np.dtype(n) for n in ("float32", "float64", "float16")}


def check_out(out_shape, out_dtype, result: np.dtype, expected_shape, casting: str = "same_kind") -> None:
    if tuple(out_shape) != tuple(expected_shape):
        raise ValueError(f"matmul: out has shape {tuple(out_shape)}, expected {tuple(expected_shape)}")
    if is_fp8(out_dtype):
        raise TypeError(f"matmul: out has dtype {np.dtype(out_dtype).name}; fp8 is an operand type only "
                        f"(results are float32, bfloat16 or float16)")
    if not np.can_cast(result, out_dtype, casting=casting):
        raise TypeError(f"matmul: cannot cast the result from dtype {result.name!r} to out's dtype "
                        f"{np.dtype(out_dtype).name!r} with casting rule {casting!r}")


@dataclass(frozen=True)
class OperandView:
    """How the kernel reads one operand without a copy: element (b, r, c) lives at
    ``offset + b * batch_stride + r * ld + c`` (row layout) or ``... + c * ld + r`` (col layout)."""

    layout: Layout
    ld: int
    batch_stride: int


def operand_view(shape, strides, itemsize: int, batch_shape) -> OperandView | None:
    """The stride-only view of an operand (already 2-D or more) broadcast to ``batch_shape``, or
    None when its strides fit no layout the kernel reads (then it must be copied once)."""
    if any(s % itemsize for s in strides):
        return None
    st = [s // itemsize for s in strides]
    rows, cols = shape[-2:]
    s_r, s_c = st[-2:]
    # A dimension of extent 1 has no meaningful stride: pick the one that makes a layout fit.
    if cols == 1 and rows == 1:
        layout, ld = Layout.ROW, 1
    elif s_c == 1 or cols == 1:
        layout, ld = Layout.ROW, (s_r if rows > 1 else cols)
    elif s_r == 1 or rows == 1:
        layout, ld = Layout.COL, (s_c if cols > 1 else rows)
    else:
        return None
    # Batch dims: right-align with the output's, stride 0 for broadcast (or absent) ones, then find
    # one stride s with offset(b) = b * s for the flattened index.
    nb = len(batch_shape)
    own = list(zip(shape[:-2], st[:-2]))
    own = [(1, 0)] * (nb - len(own)) + own
    stride = flat_batch_stride(batch_shape, [0 if own_size == 1 else s for own_size, s in own])
    return None if stride is None else OperandView(layout, ld, stride)


def flat_batch_stride(batch_shape, strides) -> int | None:
    """The one stride s with offset(i) = i * s for the flattened batch index i over axes of
    ``batch_shape`` with element ``strides`` (0 for a broadcast axis), or None when none exists."""
    dims = [(size, s) for size, s in zip(batch_shape, strides) if size != 1]
    if not dims:
        return 0
    unit = dims[-1][1]
    span = 1
    for size, s in reversed(dims):
        if s != unit * span:
            return None
        span *= size
    return unit


def vector_alignment(address: int, view: OperandView, itemsize: int, max_bytes: int = 16) -> int:
    """Widest vector (in elements, a power of two, at most ``max_bytes``) that every row (or column)
    start of the operand is aligned to: it must divide the first element's address, the leading
    dimension and the batch stride."""
    width = max(1, max_bytes // itemsize)
    while width > 1 and (address % width or view.ld % width or view.batch_stride % width):
        width //= 2
    return width


def dense_problem(batch: int, m: int, n: int, k: int, dtype, *, precision: str = "default",
                  lhs_layout: Layout = Layout.ROW, rhs_layout: Layout = Layout.ROW):
    """The `MatmulProblem` of freshly allocated contiguous operands (the CLI's and the tuner's
    problems given by sizes): each operand's alignment follows from its leading dimension."""
    from ..problem import MatmulProblem
    dt = np.dtype(dtype)
    et, out = element_type(dt), element_type(WIDENED.get(dt, dt))
    aligns = []
    for layout, rows, cols in ((Layout(lhs_layout), m, k), (Layout(rhs_layout), k, n)):
        ld = cols if layout is Layout.ROW else rows
        aligns.append(vector_alignment(0, OperandView(layout, ld, rows * cols), dt.itemsize))
    return MatmulProblem(batch, m, n, k, et, et, out, Layout(lhs_layout), Layout(rhs_layout), *aligns,
                         precision)
