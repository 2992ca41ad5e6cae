"""The prepare step of a call: a checked request's arrays on the device, and its `MatmulProblem`.

The operands are viewed on the device without copies where their strides allow (`DeviceOperand`:
the array the kernel reads, how it reads it (call/views.py), its vector alignment); ``c``, ``bias``
and the scale arrays likewise (`DeviceTerm`). Only strides no view describes, host arrays and dtype
conversions are copied, and each copy is recorded (a repeated call may skip this step only when
nothing was copied). The `MatmulProblem` the kernels are configured for follows from the request
and the operands' views.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from ..batch.group_walk import LIST_FIELDS
from ..dtypes import WIDENED, bits_dtype, device_dtype, element_type
from ..epilogue.grouped_terms import term_strides
from ..problem import Groups, Layout, MatmulProblem
from .arrays import CallArrays, Imported, ListArrays, import_array
from .request import Request
from ..views import CView, OperandView, c_view, operand_view, out_view, same_view, vector_alignment


@dataclass
class DeviceOperand:
    array: object            # device array read by the kernel
    view: OperandView
    align: int = 1           # widest aligned vector access, in elements
    copied: bool = False     # the kernel reads a copy (converted, contiguous or moved), not the input
    #: Arrays the kernel reads through offsets from ``array`` (a list layout's copies): held until
    #: the launch, or their memory goes back to the pool while the kernel still reads it.
    holds: tuple = ()


@dataclass
class DeviceTerm:
    """An epilogue array on the device (``c``, ``bias``, a scale): ``strides`` as its parameters
    name them (c: a `CView`; bias and scales: one element stride), ``copied`` as for operands."""

    array: object
    strides: object
    copied: bool = False


class WeightStrides(NamedTuple):
    """A quantized rhs's scales or zeros: (group, n) at ``expert * batch_stride + group * ld + n``."""

    ld: int
    batch_stride: int


class GroupStrides(NamedTuple):
    """A grouped call's term: element i of group g at ``g * group_stride + i * stride``."""

    stride: int
    group_stride: int


@dataclass
class Prepared:
    """A request's device arrays and problem (None when there is nothing to multiply)."""

    request: Request
    problem: MatmulProblem | None = None
    lhs: DeviceOperand | None = None
    rhs: DeviceOperand | None = None
    c: DeviceTerm | None = None
    bias: DeviceTerm | None = None
    lhs_scale: DeviceTerm | None = None
    rhs_scale: DeviceTerm | None = None
    #: A grouped call's per-row scale and its offsets or counts (int32).
    row_scale: DeviceTerm | None = None
    groups: DeviceTerm | None = None
    #: A quantized rhs's scales and zeros (its packed words are ``rhs``), with their leading dimensions.
    qscale: DeviceTerm | None = None
    qzero: DeviceTerm | None = None
    mul: DeviceTerm | None = None
    #: Whether the kernels write the caller's ``out`` itself (`writes_in_place`), not a temporary.
    in_place: bool = False

    @property
    def terms(self) -> dict:
        """The epilogue's device arrays by name (those the request has), and a grouped call's groups."""
        return {name: t for name, t in (("c", self.c), ("bias", self.bias), ("lhs_scale", self.lhs_scale),
                                        ("rhs_scale", self.rhs_scale), ("row_scale", self.row_scale),
                                        ("groups", self.groups), ("mul", self.mul)) if t is not None}

    @property
    def copied(self) -> bool:
        """Whether anything the kernel reads is a copy (a repeated call cannot skip this step then)."""
        return any(x.copied for x in (self.lhs, self.rhs, *self.terms.values()))


def prepare(runtime, arrays: CallArrays, request: Request) -> Prepared:
    """Step 4: the request's arrays on the device, viewed in place where they can be."""
    shape, grouped = request.shape, request.groups
    if shape.empty if grouped is None else 0 in shape.out_shape:
        return Prepared(request)
    lhs = _operand(runtime, arrays.a, request.types.lhs, shape, shape.lhs_vector, True, grouped is not None)
    types = request.types
    if request.weights is not None:
        prepared = _quantized(lhs, request)
        _epilogue_terms(runtime, prepared, request)
        return _placed(runtime, prepared)
    rhs = _operand(runtime, arrays.b, request.types.rhs, shape, shape.rhs_vector, False, grouped is not None)
    problem = MatmulProblem(shape.batch if grouped is None else grouped.groups, shape.m, shape.n, shape.k,
                            element_type(types.lhs), element_type(types.rhs), element_type(types.result),
                            lhs.view.layout, rhs.view.layout, lhs.align, rhs.align, request.precision, request.epilogue,
                            groups=None if grouped is None else Groups(grouped.layout))
    prepared = Prepared(request, problem, lhs, rhs)
    _epilogue_terms(runtime, prepared, request)
    return _accumulating(runtime, _placed(runtime, prepared))


def _placed(runtime, prepared: Prepared) -> Prepared:
    """``prepared`` knowing whether the kernels write the caller's ``out`` itself."""
    out = prepared.request.out
    prepared.in_place = out is not None and writes_in_place(runtime, prepared, out)
    return prepared


def writes_in_place(runtime, prepared: Prepared, out: Imported) -> bool:
    """Whether the kernels may write ``out`` directly: a device array of the result dtype,
    C-contiguous or with rows the kernels can address (`out_view`: elements contiguous along N,
    rows and batch entries 16-byte aligned and apart), whose bytes no input touches, or that is
    ``c`` itself exactly (each element reads its own c before it writes it)."""
    request = prepared.request
    if out.host or out.dtype != request.dtype:
        return False
    if not out.array.flags.c_contiguous and out_view(out.array, prepared.problem,
                                                     runtime.byte_span(out.array)[1]) is None:
        return False
    c = prepared.c.array if prepared.c is not None else None
    operands = (prepared.lhs.array, prepared.rhs.array)
    for x in reads_of(prepared):
        # c read element by element where it is written; an operand that is c too is read by
        # other cubes (other output tiles) while this one writes: it must not overlap.
        if c is not None and x is c and same_view(runtime, x, out.array) and not any(x is y for y in operands):
            continue
        if runtime.may_overlap(out.array, x):
            return False
    return True


def reads_of(prepared: Prepared) -> list:
    """The device arrays a call's kernels read (what ``out`` must not overlap to be written directly)."""
    weights = [t.array for t in (prepared.qscale, prepared.qzero) if t is not None]
    return [prepared.lhs.array, prepared.rhs.array] + [t.array for t in prepared.terms.values()] + weights


def _accumulating(runtime, prepared: Prepared) -> Prepared:
    """``prepared`` with the accumulating epilogue (`Epilogue.accumulate`: a writer may add the
    product into the output instead of reading c) where c is ``out`` itself, written in place, with
    beta 1 and nothing applied after the sum."""
    request, epilogue, out = prepared.request, prepared.problem.epilogue, prepared.request.out
    if (out is None or prepared.c is None or prepared.c.copied or request.beta != 1 or epilogue.activation
            or epilogue.mul or epilogue.row_scale):
        return prepared
    if same_view(runtime, prepared.c.array, out.array) and prepared.in_place:
        prepared.problem = replace(prepared.problem, epilogue=replace(epilogue, accumulate=True))
    return prepared


def _epilogue_terms(runtime, prepared: Prepared, request: Request) -> None:
    shape, grouped = request.shape, request.groups
    if request.c is not None:
        prepared.c = _c_term(runtime, request.c, shape)
    if request.bias is not None:
        prepared.bias = (_vector_term(runtime, request.bias) if grouped is None
                         else _grouped_term(runtime, _device_copy(runtime, request.bias), request.bias.host,
                                            per_group="bias" in request.per_group))
    if request.mul is not None:
        # Read as c is, broadcast to the activation's values (half the columns of a gated derivative).
        prepared.mul = _c_term(runtime, request.mul, replace(shape, out_shape=shape.value_shape))
    for name in ("lhs_scale", "rhs_scale"):
        scale = getattr(request, name)
        if scale is not None:
            setattr(prepared, name, _scale_term(runtime, scale) if grouped is None else
                    _grouped_term(runtime, *_f32(runtime, scale.array), per_group=scale.per_group))
    if request.row_scale is not None:
        prepared.row_scale = _grouped_term(runtime, *_f32(runtime, request.row_scale),
                                           per_group="row_scale" in request.per_group)
    if grouped is not None:
        prepared.groups = _extents(runtime, request.extents)


def _quantized(lhs: DeviceOperand, request: Request) -> Prepared:
    """A call of a quantized rhs: its packed words are the rhs operand (one weight for every batch
    entry; a grouped call's experts: one per group), its scales and zeros terms of their own; the
    problem's rhs type is the activations'. A batch of contiguous activations with nothing per row
    but the product is folded into M, so that the weights are streamed once (x of (B, M, K) is a
    (B * M, K) matrix; the output too)."""
    shape, types, weights, grouped = request.shape, request.types, request.weights, request.groups
    batch, m = (shape.batch, shape.m) if grouped is None else (grouped.groups, shape.m)
    folds = (grouped is None and batch > 1 and lhs.view.layout is Layout.ROW
             and lhs.view.batch_stride == m * lhs.view.ld and request.c is None
             and (request.bias is None or request.bias_axis == 1))
    if folds:
        batch, m = 1, batch * m
    step = weights.strides
    rhs = DeviceOperand(weights.packed, OperandView(Layout.ROW, weights.ld, step[0]), 1)
    problem = MatmulProblem(batch, m, shape.n, shape.k, element_type(types.lhs), element_type(types.rhs),
                            element_type(types.result), lhs.view.layout, Layout.ROW, lhs.align, 1,
                            request.precision, request.epilogue, weights=weights.format,
                            groups=None if grouped is None else Groups(grouped.layout))
    scales = DeviceTerm(weights.scales, WeightStrides(weights.scale_ld, step[1]))
    zeros = None if weights.zeros is None else DeviceTerm(weights.zeros, WeightStrides(weights.zero_ld, step[2]))
    return Prepared(request, problem, lhs, rhs, qscale=scales, qzero=zeros)


def _operand(runtime, imp: Imported, dtype, shape, vector: bool, lhs: bool, grouped: bool = False) -> DeviceOperand:
    rt = runtime
    # A grouped call's 2-D operand is the groups' one matrix (batch stride 0), its 3-D one per group.
    batch_shape = tuple(imp.shape[:-2]) if grouped else shape.batch_shape
    if imp.host:
        x, copied = rt.upload(np.asarray(imp.array, dtype=dtype)), True
    elif imp.dtype != dtype:
        x, copied = _converted(rt, imp, dtype), True
    else:
        x, copied = imp.array, False
    if vector:
        x = x.reshape((1,) + x.shape) if lhs else x.reshape(x.shape + (1,))
    view = operand_view(x.shape, x.strides, x.dtype.itemsize, batch_shape)
    if view is None and 0 in x.shape:    # a grouped call's empty reduction: nothing is read
        return DeviceOperand(x, OperandView(Layout.ROW, max(1, x.shape[-1]), 0), 1, copied)
    if view is None:
        # Strides that fit no layout (or a broadcast that no single batch stride describes):
        # one contiguous copy, materializing the broadcast batch.
        full = batch_shape + x.shape[-2:]
        if x.shape != full:
            x = rt.to_device(np.ascontiguousarray(np.broadcast_to(rt.to_host(x), full)))
        else:
            x = rt.contiguous(x)
        copied = True
        view = operand_view(x.shape, x.strides, x.dtype.itemsize, batch_shape)
    align = vector_alignment(rt.element_address(x), view, x.dtype.itemsize)
    return DeviceOperand(x, view, align, copied)


def _converted(runtime, imp: Imported, dtype):
    """A device array's values in ``dtype``: on the device, or through the host where a side is
    bfloat16 or fp8 (held as bits, which a device library would convert as integers)."""
    if bits_dtype(imp.dtype) is not None or bits_dtype(dtype) is not None:
        return runtime.upload(runtime.download(imp.array, imp.dtype).astype(dtype))
    return runtime.contiguous(imp.array, dtype)


def _device_copy(runtime, imp: Imported):
    """A device array holding an imported array in its own dtype (bfloat16 moved as its bits)."""
    if not imp.host:
        return imp.array
    element_type(imp.dtype)  # TypeError naming the supported dtypes
    return runtime.upload(np.asarray(imp.array))


def _c_term(runtime, c: Imported, shape) -> DeviceTerm:
    """``c`` read in place where its strides describe the broadcast to the output; else copied once,
    broadcast materialized."""
    dev = _device_copy(runtime, c)
    view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
    copied = c.host
    if view is None:
        host = np.ascontiguousarray(np.broadcast_to(runtime.download(c.array, c.dtype), shape.out_shape))
        dev, copied = runtime.upload(host), True
        view = c_view(dev.shape, dev.strides, dev.dtype.itemsize, shape)
    return DeviceTerm(dev, view, copied)


def _vector_term(runtime, vec: Imported) -> DeviceTerm:
    """A 1-D array (``bias``) and its element stride."""
    dev, copied = _device_copy(runtime, vec), vec.host
    stride, itemsize = dev.strides[0], dev.dtype.itemsize
    if stride % itemsize:
        dev, copied = runtime.contiguous(dev), True
        stride = itemsize
    return DeviceTerm(dev, stride // itemsize, copied)


def _scale_term(runtime, scale) -> DeviceTerm:
    """A scale array as float32 on the device, with its stride: a vector's element stride along its
    one long axis (0: one value), a block scale's row pitch (its rows made contiguous)."""
    imp = scale.array
    dev, copied = _device_copy(runtime, imp), imp.host
    if dev.dtype != np.float32 or scale.kind == "block" and not dev.flags.c_contiguous:
        dev, copied = runtime.to_device(np.ascontiguousarray(runtime.download(imp.array, imp.dtype), np.float32)), True
    if scale.kind == "block":
        return DeviceTerm(dev, dev.strides[0] // dev.dtype.itemsize, copied)
    long = [st for n, st in zip(dev.shape, dev.strides) if n > 1]
    if long and long[0] % dev.dtype.itemsize:
        dev, copied = runtime.contiguous(dev), True
        long = [dev.dtype.itemsize]
    return DeviceTerm(dev, long[0] // dev.dtype.itemsize if long else 0, copied)


def _f32(runtime, imp: Imported) -> tuple[object, bool]:
    """(a scale's values as a C-contiguous float32 device array, whether that is a copy)."""
    dev = _device_copy(runtime, imp)
    if dev.dtype == np.float32 and dev.flags.c_contiguous:
        return dev, imp.host
    if bits_dtype(imp.dtype) is None and not imp.host:     # converted on the device: no synchronization
        return runtime.contiguous(dev, np.float32), True
    return runtime.to_device(np.ascontiguousarray(runtime.download(imp.array, imp.dtype), np.float32)), True


def _grouped_term(runtime, dev, copied: bool = False, *, per_group: bool) -> DeviceTerm:
    """A grouped call's term (bias, scale, row scale) with its `GroupStrides` (copied contiguous
    where no pair of strides reads it)."""
    itemsize = dev.dtype.itemsize
    found = (term_strides(dev.shape, [st // itemsize for st in dev.strides], per_group)
             if all(st % itemsize == 0 for st in dev.strides) else None)
    if found is None:
        dev, copied = runtime.contiguous(dev), True
        found = term_strides(dev.shape, [st // itemsize for st in dev.strides], per_group)
    return DeviceTerm(dev, GroupStrides(*found), copied)


def _extents(runtime, imp: Imported) -> DeviceTerm:
    """Offsets or counts as the kernels read them: contiguous int32 on the device (converted there,
    with no synchronization, where they are not)."""
    if imp.host:
        return DeviceTerm(runtime.upload(np.ascontiguousarray(imp.array, np.int32)), 1, True)
    if imp.dtype != np.int32 or not imp.array.flags.c_contiguous:
        return DeviceTerm(runtime.contiguous(imp.array, np.int32), 1, True)
    return DeviceTerm(imp.array, 1)


def prepare_list(runtime, arrays: ListArrays, request: Request) -> Prepared:
    """Step 4 of a list-layout grouped call: each side's operands as one base array and per-group
    element offsets from it, the groups' table (`LIST_FIELDS`, int64, uploaded: its addresses are
    the call's), the packed output's offsets, and the `MatmulProblem` (its sizes the largest)."""
    types, sizes = request.types, request.sizes
    lhs, lhs_at = _list_side(runtime, arrays.a, types.lhs, [(m, k) for m, n, k in sizes])
    rhs, rhs_at = _list_side(runtime, arrays.b, types.rhs, [(k, n) for m, n, k in sizes])
    table, out_offset = [], 0
    for (m, n, k), (lo, lld), (ro, rld) in zip(sizes, lhs_at, rhs_at):
        columns = request.epilogue.out_columns(n)          # half of them under a gated activation
        table.append((m, n, k, lo, lld, ro, rld, out_offset, columns))
        out_offset += m * columns
    assert len(table[0]) == len(LIST_FIELDS)
    g = request.groups
    problem = MatmulProblem(g.groups, g.m, g.n, g.k, element_type(types.lhs), element_type(types.rhs),
                            element_type(types.result), lhs.view.layout, rhs.view.layout, lhs.align, rhs.align,
                            request.precision, request.epilogue, groups=Groups("list"))
    groups = DeviceTerm(runtime.upload(np.asarray(table, np.int64)), 1, True)
    return _placed(runtime, Prepared(request, problem, lhs, rhs, groups=groups))


def _list_side(runtime, imps: list, dtype, shapes: list) -> tuple[DeviceOperand, list]:
    """One side's operands of a list-layout call, ``shapes`` their (rows, cols): (the operand the
    kernel's base parameter reads, with the layout, first leading dimension and alignment of them
    all (offsets, leading dimensions and extents along the contiguous axis: a vector lies wholly
    inside or outside each group); (element offset from it, leading dimension) per group). CUDA
    device arrays in place (offsets between their addresses, in the layout of the first; another
    layout is copied into it, the copy held by the operand); anything else packed row-major on the
    host and moved in one copy (OpenCL buffers have no addresses to take differences of)."""
    itemsize = np.dtype(device_dtype(element_type(dtype))).itemsize
    if runtime.backend == "cuda" and not any(x.host or x.dtype != dtype for x in imps):
        ops = [_operand(runtime, x, dtype, None, False, True, grouped=True) for x in imps]
        layout = ops[0].view.layout
        for i, op in enumerate(ops):
            if op.view.layout is not layout:        # the first's layout, copied on the device
                x = runtime.contiguous(op.array.T).T if layout is Layout.COL else runtime.contiguous(op.array)
                ops[i] = DeviceOperand(x, operand_view(x.shape, x.strides, itemsize, ()), op.align, True)
        addresses = [runtime.element_address(op.array) for op in ops]
        if all(runtime.byte_span(op.array)[1] % itemsize == 0 for op in ops):
            align = min(vector_alignment(a, op.view, itemsize) for a, op in zip(addresses, ops))
            base = ops[0]
            at = [(a - addresses[0], op.view.ld) for a, op in zip(addresses, ops)]
            return DeviceOperand(base.array, base.view, _extents_align(align, shapes, layout),
                                 any(op.copied for op in ops), tuple(op.array for op in ops[1:] if op.copied)), at
    host = [np.ascontiguousarray(runtime.download(x.array, x.dtype) if not x.host else x.array, dtype) for x in imps]
    at, offset = [], 0
    for h in host:
        at.append((offset, h.shape[1]))
        offset += h.size
    packed = np.concatenate([h.ravel() for h in host]) if host else np.zeros(0, dtype)
    dev = runtime.upload(packed)
    align = min(vector_alignment(o, OperandView(Layout.ROW, ld, 0), itemsize) for o, ld in at)
    return DeviceOperand(dev, OperandView(Layout.ROW, at[0][1], 0), _extents_align(align, shapes, Layout.ROW), True), at


def _extents_align(align: int, shapes: list, layout: Layout) -> int:
    """``align`` narrowed until it divides every group's extent along the contiguous axis of
    ``layout`` (the loaders narrow by the problem's extent, a list's largest: not every group's)."""
    for rows, cols in shapes:
        extent = cols if layout is Layout.ROW else rows
        while align > 1 and extent % align:
            align //= 2
    return align


def dense_problem(batch: int, m: int, n: int, k: int, dtype, *, precision: str = "default",
                  lhs_layout: Layout = Layout.ROW, rhs_layout: Layout = Layout.ROW) -> MatmulProblem:
    """The `MatmulProblem` of freshly allocated contiguous operands (the CLI's and the tuner's
    problems given by sizes): each operand's alignment follows from its leading dimension."""
    dt = np.dtype(dtype)
    et, out = element_type(dt), element_type(WIDENED.get(dt, dt))
    aligns = []
    for layout, rows, cols in ((Layout(lhs_layout), m, k), (Layout(rhs_layout), k, n)):
        ld = cols if layout is Layout.ROW else rows
        aligns.append(vector_alignment(0, OperandView(layout, ld, rows * cols), dt.itemsize))
    return MatmulProblem(batch, m, n, k, et, et, out, Layout(lhs_layout), Layout(rhs_layout), *aligns,
                         precision)


__all__ = ["CView", "DeviceOperand", "DeviceTerm", "Prepared", "WeightStrides", "dense_problem", "prepare"]
