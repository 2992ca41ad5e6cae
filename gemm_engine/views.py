"""How kernels read arrays in place: strides to layouts, without copies (used by the prepare step).

An operand is read row- or column-major with any leading dimension and one batch stride
(`operand_view`); ``c`` through row, column and batch strides, 0 where it broadcasts (`c_view`).
Strides no such view describes are copied once by the prepare step.
"""
from __future__ import annotations

from dataclasses import dataclass

from .problem import Layout


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


@dataclass(frozen=True)
class CView:
    """Element (b, r, c) of the output-shaped view of ``c`` is at
    ``offset + b * batch_stride + r * row_stride + c * col_stride`` (strides in elements)."""

    row_stride: int
    col_stride: int
    batch_stride: int


def c_view(c_shape, c_strides, itemsize: int, shape) -> CView | None:
    """Strides that read ``c`` broadcast to the call's (batch, M, N) output (``shape``: its
    `CallShape`), or None when it must be copied (strides not whole elements, or batch axes no
    single stride describes)."""
    if any(s % itemsize for s in c_strides):
        return None
    out = tuple(shape.out_shape)
    st = [s // itemsize for s in c_strides]
    # numpy broadcasting: right-align, a missing or size-1 axis reads with stride 0.
    pad = len(out) - len(c_shape)
    full = [0] * pad + [0 if size == 1 else s for size, s in zip(c_shape, st)]
    # Back to the kernel's (batch..., M, N): a 1-D operand's removed axis has extent 1.
    if shape.rhs_vector:
        full.append(0)
    if shape.lhs_vector:
        full.insert(len(full) - 1, 0)
    batch = flat_batch_stride(shape.batch_shape, full[:-2])
    return None if batch is None else CView(full[-2], full[-1], batch)


@dataclass(frozen=True)
class OutputView:
    """How the kernels write the result in place: element (b, r, c) of the (batch, M, N) product
    at ``offset + b * batch_stride + r * ld + c``."""

    ld: int
    batch_stride: int


#: Bytes every row and batch entry of an output written in place with strides of its own starts at:
#: at least what a contiguous result of any N may give the kernels (their vector and TMA stores
#: check the alignment they need per call, against these strides).
OUTPUT_ALIGN = 16


def output_view(shape, strides, itemsize: int, first_byte: int, batch: int, m: int, n: int) -> OutputView | None:
    """The in-place view of an output array (``shape``, byte ``strides``, its ``first_byte``'s
    address) for a product the kernels see as (``batch``, ``m``, ``n``): its leading axes are the
    call's batch axes and M (all folded into ``m`` where ``batch`` is 1 and they are more than one
    row), elements contiguous along N, rows and batch entries apart (no element written twice),
    16-byte aligned and whole 16-byte pieces long. None where no such view exists (the result then
    goes through a temporary)."""
    if len(shape) < 2 or any(s < 0 or s % itemsize for s in strides) or first_byte % OUTPUT_ALIGN:
        return None
    # The array must be the (batch..., M, N) result itself: a vector operand's result lacks an
    # axis (its last two are then not M and N), and is never written in place.
    rows = 1
    for size in shape[:-1]:
        rows *= size
    if shape[-1] != n or (shape[-2] != m if batch > 1 else rows != m):
        return None
    st = [s // itemsize for s in strides]
    if n > 1 and st[-1] != 1:
        return None
    lead, lead_st = list(shape[:-1]), st[:-1]
    if batch == 1:       # every leading axis is rows: one stride over them all
        ld = flat_batch_stride(lead, lead_st) if m > 1 else n
        batch_stride = 0
    else:
        ld = lead_st[-1] if shape[-2] > 1 else n
        batch_stride = flat_batch_stride(lead[:-1], lead_st[:-1])
    if ld is None or batch_stride is None:
        return None
    wide = OUTPUT_ALIGN // itemsize if OUTPUT_ALIGN % itemsize == 0 else 0
    # Rows of whole 16-byte pieces too: a kernel's paired or vector stores at the last columns of
    # a row may reach past N into what only a wider leading dimension makes room for (seen on the
    # H100: N = 257 in rows 264 apart, the padding written), where a contiguous result's next row
    # would be rewritten after.
    if not wide or n % wide or m > 1 and (ld < n or ld % wide):
        return None
    if batch > 1 and (batch_stride < (m - 1) * ld + n or not wide or batch_stride % wide):
        return None
    return OutputView(ld, batch_stride)


def out_view(array, problem, first_byte: int):
    """How the kernels would write ``array`` in place (`output_view`), or None: a grouped call
    writes only C-contiguous outputs in place."""
    if problem.groups is not None:
        return None
    return output_view(array.shape, array.strides, array.dtype.itemsize, first_byte, problem.batch, problem.m,
                       problem.epilogue.out_columns(problem.n))


def same_view(runtime, x, y) -> bool:
    """Whether device arrays ``x`` and ``y`` are one view of the same memory."""
    return (x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype
            and runtime.byte_span(x) == runtime.byte_span(y))
