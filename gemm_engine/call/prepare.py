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

import numpy as np

from ..dtypes import WIDENED, bits_dtype, element_type
from ..epilogue.scales import dequantize
from ..problem import Layout, MatmulProblem
from .arrays import CallArrays, Imported, import_array
from .request import Request
from ..views import CView, OperandView, c_view, operand_view, vector_alignment


@dataclass
class DeviceOperand:
    array: object            # device array read by the kernel
    view: OperandView
    align: int = 1           # widest aligned vector access, in elements
    copied: bool = False     # the kernel reads a copy (converted, contiguous or moved), not the input


@dataclass
class DeviceTerm:
    """An epilogue array on the device (``c``, ``bias``, a scale): ``strides`` as its parameters
    name them (c: a `CView`; bias and scales: one element stride), ``copied`` as for operands."""

    array: object
    strides: object
    copied: bool = False


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
    mul: DeviceTerm | None = None

    @property
    def terms(self) -> dict:
        """The epilogue's device arrays by name (those the request has)."""
        return {name: t for name, t in (("c", self.c), ("bias", self.bias), ("lhs_scale", self.lhs_scale),
                                        ("rhs_scale", self.rhs_scale), ("mul", self.mul)) if t is not None}

    @property
    def copied(self) -> bool:
        """Whether anything the kernel reads is a copy (a repeated call cannot skip this step then)."""
        return any(x.copied for x in (self.lhs, self.rhs, *self.terms.values()))


def prepare(runtime, arrays: CallArrays, request: Request) -> Prepared:
    """Step 4: the request's arrays on the device, viewed in place where they can be."""
    shape = request.shape
    if shape.empty:
        return Prepared(request)
    lhs = _operand(runtime, arrays.a, request.types.lhs, shape, shape.lhs_vector, lhs=True)
    rhs = _operand(runtime, arrays.b, request.types.rhs, shape, shape.rhs_vector, lhs=False)
    types = request.types
    problem = MatmulProblem(shape.batch, shape.m, shape.n, shape.k, element_type(types.lhs), element_type(types.rhs),
                            element_type(types.result), lhs.view.layout, rhs.view.layout, lhs.align, rhs.align,
                            request.precision, request.epilogue)
    prepared = Prepared(request, problem, lhs, rhs)
    if request.c is not None:
        prepared.c = _c_term(runtime, request.c, shape)
    if request.bias is not None:
        prepared.bias = _vector_term(runtime, request.bias)
    if request.mul is not None:
        # Read as c is, broadcast to the activation's values (half the columns of a gated derivative).
        prepared.mul = _c_term(runtime, request.mul, replace(shape, out_shape=shape.value_shape))
    for name in ("lhs_scale", "rhs_scale"):
        scale = getattr(request, name)
        if scale is not None:
            setattr(prepared, name, _scale_term(runtime, scale))
    return prepared


def dequantized(runtime, arrays: CallArrays, request: Request) -> tuple[CallArrays, Request]:
    """The call with its operands multiplied by their scales in float32, in their own library
    (torch tensors by torch on their device, everything else through the host): the fallback where
    no kernel applies block scales."""
    shape = request.shape
    out = []
    for imp, scale, lhs in ((arrays.a, request.lhs_scale, True), (arrays.b, request.rhs_scale, False)):
        label = "a" if lhs else "b"
        host_scale = None if scale is None else runtime.download(scale.array.array, scale.array.dtype)
        if imp.library == "torch":
            import torch
            device = imp.original.device
            values = None if scale is None else torch.as_tensor(np.asarray(host_scale, np.float32), device=device)
            scaled = dequantize(imp.original, scale, values, lhs, shape.k, shape.n, torch)
        else:
            scaled = dequantize(runtime.download(imp.array, imp.dtype), scale, host_scale, lhs, shape.k, shape.n, np)
            # Device operands stay device arrays (their result too), host ones host arrays.
            scaled = scaled if imp.host else runtime.upload(np.ascontiguousarray(scaled))
        out.append(import_array(scaled, label, runtime))
    return CallArrays(out[0], out[1], arrays.out), request.dequantized()


def _operand(runtime, imp: Imported, dtype, shape, vector: bool, lhs: bool) -> DeviceOperand:
    rt = runtime
    if imp.host:
        x, copied = rt.upload(np.asarray(imp.array, dtype=dtype)), True
    elif imp.dtype != dtype:
        x, copied = _converted(rt, imp, dtype), True
    else:
        x, copied = imp.array, False
    if vector:
        x = x.reshape((1,) + x.shape) if lhs else x.reshape(x.shape + (1,))
    view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
    if view is None:
        # Strides that fit no layout (or a broadcast that no single batch stride describes):
        # one contiguous copy, materializing the broadcast batch.
        full = shape.batch_shape + x.shape[-2:]
        if x.shape != full:
            x = rt.to_device(np.ascontiguousarray(np.broadcast_to(rt.to_host(x), full)))
        else:
            x = rt.contiguous(x)
        copied = True
        view = operand_view(x.shape, x.strides, x.dtype.itemsize, shape.batch_shape)
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


__all__ = ["CView", "DeviceOperand", "DeviceTerm", "Prepared", "dense_problem", "dequantized", "prepare"]
