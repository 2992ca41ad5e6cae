"""Host side of the fused epilogue: check ``alpha``, ``beta``, ``c``, ``bias``, ``activation`` and
``out_dtype`` before anything runs, and describe ``c`` and ``bias`` to the kernel by strides.

`matmul(a, b, alpha=, beta=, c=, bias=, bias_axis=, activation=, out_dtype=)` computes
``act(alpha * (a @ b) + beta * c + bias)`` in one kernel (see global_/epilogue.py for the device
side). Conventions, chosen to match what BLAS and PyTorch users expect:

* ``c`` broadcasts to the output's shape (numpy rules) and is read in place through strides (0 for
  a broadcast axis); only strides no single batch stride describes are copied once.
* ``beta`` defaults to 1 when ``c`` is given (``beta=0`` then means c is not read, as in BLAS).
* ``bias`` is one vector: over the output's columns (length N, ``bias_axis=-1`` or 1, the default)
  or over its rows (length M, ``bias_axis=0`` or -2).
* The result dtype is ``out_dtype`` when given, else numpy's promotion of a, b, c and bias.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..dtypes import element_type, is_fp8
from .numpy_rules import CallShape, flat_batch_stride, result_dtype
from ..epilogue.activations import Activation, resolve_activation
from ..epilogue.spec import IDENTITY, Epilogue


@dataclass(frozen=True)
class FusionRequest:
    """The checked epilogue options of one call (arrays not yet on the device)."""

    alpha: float
    beta: float
    c: object | None
    bias: object | None
    bias_axis: int            # 0: over rows (M), 1: over columns (N)
    activation: Activation | None
    out_dtype: np.dtype | None
    #: Dequantizing scale arrays (scales.py `Scale`s with an array): the epilogue's per row of a /
    #: column of b (a per-tensor array: stride 0), the global level's per block of K.
    lhs_scale: object | None = None
    rhs_scale: object | None = None

    @property
    def plain(self) -> bool:
        return (self.alpha == 1 and self.c is None and self.bias is None and self.activation is None
                and self.lhs_scale is None and self.rhs_scale is None)


NO_FUSION = FusionRequest(1.0, 0.0, None, None, 1, None, None)


def _scalar(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"matmul: {name} must be a real number, got {type(value).__name__}")
    return float(value)


def check_fusion(shape: CallShape, *, alpha, beta, c, bias, bias_axis, activation, out_dtype,
                 casting: str = "same_kind", product=None) -> FusionRequest:
    """Validate the epilogue options against the call's shape (numpy's messages where it has one).
    ``c`` and ``bias`` are arrays (anything with ``shape`` and ``dtype``); ``out_dtype`` must be a
    cast of the natural result (``product`` promoted with c and bias) that ``casting`` allows."""
    alpha = _scalar(alpha, "alpha")
    if beta is None:
        beta = 1.0 if c is not None else 0.0
    beta = _scalar(beta, "beta")
    if c is None and beta != 0:
        raise ValueError(f"matmul: beta={beta} needs c (the array it scales); got c=None")
    if c is not None and beta == 0:
        c = None  # BLAS convention: beta = 0 means c is not read
    if c is not None:
        try:
            np.broadcast_shapes(tuple(c.shape), shape.out_shape)
            fits = np.broadcast_shapes(tuple(c.shape), shape.out_shape) == tuple(shape.out_shape)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"matmul: c of shape {tuple(c.shape)} does not broadcast to the output "
                             f"shape {tuple(shape.out_shape)}")
    if bias_axis not in (0, 1, -1, -2):
        raise ValueError(f"matmul: bias_axis must be -1 or 1 (one value per output column) or 0 or -2 "
                         f"(per output row), got {bias_axis!r}")
    axis = 1 if bias_axis in (1, -1) else 0
    if bias is not None:
        want = shape.n if axis == 1 else shape.m
        if len(bias.shape) != 1 or bias.shape[0] != want:
            what = "columns (N" if axis == 1 else "rows (M"
            raise ValueError(f"matmul: bias must be 1-D with one value per output {what} = {want}) "
                             f"for bias_axis={bias_axis}, got shape {tuple(bias.shape)}")
    activation = resolve_activation(activation)
    request = FusionRequest(alpha, beta, c, bias, axis, activation, None)
    if out_dtype is not None:
        out_dtype = np.dtype(out_dtype)
        element_type(out_dtype)  # TypeError naming the supported dtypes
        if is_fp8(out_dtype):
            raise TypeError(f"matmul: out_dtype {out_dtype.name}: fp8 is an operand type only (results "
                            f"are float32, bfloat16 or float16)")
        if product is not None:
            natural = fused_dtype(np.dtype(product), request)
            if not np.can_cast(natural, out_dtype, casting=casting):
                raise TypeError(f"matmul: cannot cast the result from dtype({natural.name!r}) to out_dtype "
                                f"dtype({out_dtype.name!r}) with casting rule {casting!r} (numpy's rule; "
                                f"pass casting='unsafe' to allow it)")
    return FusionRequest(alpha, beta, c, bias, axis, activation, out_dtype)


def fused_dtype(inputs: np.dtype, fusion: FusionRequest) -> np.dtype:
    """The result dtype: ``out_dtype``, else numpy's promotion of the inputs with c and bias."""
    if fusion.out_dtype is not None:
        return fusion.out_dtype
    dtype = inputs
    if dtype.kind in "iu" and (fusion.c is not None or fusion.bias is not None):
        raise TypeError(f"matmul: c and bias need a floating-point result; {dtype.name} products take "
                        f"no epilogue terms")
    for extra in (fusion.c, fusion.bias):
        if extra is not None:
            dtype = result_dtype(dtype, extra.dtype)
    return dtype


def make_epilogue(fusion: FusionRequest, acc_word: str, out_word: str) -> Epilogue:
    """The kernel's epilogue for checked options, with c and bias element types from their arrays."""
    if fusion.plain:
        return IDENTITY
    c = element_type(fusion.c.dtype) if fusion.c is not None else None
    bias = element_type(fusion.bias.dtype) if fusion.bias is not None else None
    words = {out_word} | {et.compute for et in (c, bias) if et is not None}
    # An integer accumulator converts to the float result's type (int8 with scales: W8A8).
    if not words <= {"f32", "f64"} or (acc_word == "i32" and out_word == "i32"):
        raise TypeError("matmul: alpha, c, bias and activation need a floating-point result and "
                        "floating-point c / bias")
    return Epilogue(scaled=fusion.alpha != 1, c=c, bias=bias, bias_axis=fusion.bias_axis,
                    activation=fusion.activation, compute="f64" if "f64" in words else "f32",
                    lhs_scale=_scale_kind(fusion.lhs_scale), rhs_scale=_scale_kind(fusion.rhs_scale))


def _scale_kind(scale) -> str:
    """The epilogue's word for a `scales.Scale`: "" (none), "block", else "vector"."""
    return "" if scale is None else "block" if scale.kind == "block" else "vector"


@dataclass(frozen=True)
class CView:
    """Element (b, r, c) of the output-shaped view of ``c`` is at
    ``offset + b * batch_stride + r * row_stride + c * col_stride`` (strides in elements)."""

    row_stride: int
    col_stride: int
    batch_stride: int


def c_view(c_shape, c_strides, itemsize: int, shape: CallShape) -> CView | None:
    """Strides that read ``c`` broadcast to the call's (batch, M, N) output, or None when it must
    be copied (strides not whole elements, or batch axes no single stride describes)."""
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
