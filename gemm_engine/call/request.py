"""The request: step 3 of a call, every option checked once, before anything runs.

`make_request` takes the imported arrays (call/arrays.py), numpy's rules for them
(call/numpy_rules.py) and the call's options and returns a `Request`: the shape and dtypes, the fused epilogue's
terms (``act(alpha * (a @ b) + beta * c + bias)``, see epilogue/spec.py), the operands' scales
(epilogue/scales.py), ``out``, the precision and the `Epilogue` the kernels are built with.
Conventions, chosen to match what BLAS and PyTorch users expect:

* ``c`` broadcasts to the output's shape (numpy rules) and is read in place through strides;
  ``beta`` defaults to 1 when ``c`` is given (``beta=0`` then means c is not read, as in BLAS);
* ``bias`` is one vector: over the output's columns (length N, ``bias_axis=-1`` or 1, the default)
  or over its rows (length M, ``bias_axis=0`` or -2);
* number scales fold into ``alpha``; array scales become kernel arguments;
* ``mul`` multiplies the activation's result (the upstream gradient of a backward pass through a
  `Derivative`); it broadcasts to the values' shape (`CallShape.value_shape`);
* a gated activation (SwiGLU: gate and up interleaved in b's columns) halves the output's columns
  and takes no ``c``.

A new per-call argument is a field here and a parameter of the kernel signature; the arguments
step (call/arguments.py) names it for every launch path.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from ..dtypes import element_type, is_fp8
from ..epilogue.activations import Activation, resolve_activation
from ..epilogue.grouped_terms import GroupShape, column_kind, row_kind
from ..epilogue.scales import Scale
from ..epilogue.spec import IDENTITY, Epilogue
from ..problem import MatmulProblem
from .arrays import CallArrays, Imported, ListArrays
from .numpy_rules import CallShape, ResultTypes, Rules


@dataclass(frozen=True)
class CallOptions:
    """The options of one call as given (checked by `make_request`)."""

    alpha: object = 1.0
    beta: object = None
    bias_axis: object = -1
    activation: object = None
    out_dtype: object = None
    casting: str = "same_kind"
    precision: str = "default"


@dataclass(frozen=True)
class Request:
    """One checked call: what to compute, and into what."""

    shape: CallShape
    types: ResultTypes
    precision: str
    casting: str
    alpha: float
    beta: float
    c: Imported | None
    bias: Imported | None
    bias_axis: int            # 0: over rows (M), 1: over columns (N)
    activation: Activation | None
    #: Array scales (`epilogue.scales.Scale`): per row of a / column of b (stride 0 per tensor), or
    #: per block of K; number scales are folded into ``alpha``.
    lhs_scale: Scale | None
    rhs_scale: Scale | None
    out: Imported | None
    epilogue: Epilogue
    #: A grouped call (grouped_matmul): its layout and sizes, its offsets or counts, its per-row
    #: scale (float32 values: a routing weight), and the terms with a leading axis of groups.
    groups: GroupShape | None = None
    extents: Imported | None = None
    row_scale: Imported | None = None
    per_group: frozenset = frozenset()
    #: The list layout's (m, n, k) per group.
    sizes: tuple = ()
    #: The quantized weight ``b`` stands for, on the device (`quant.weight.DeviceWeight`), or None.
    weights: object = None
    mul: Imported | None = None

    @property
    def dtype(self) -> np.dtype:
        """The call's result dtype."""
        return self.types.result

    def dequantized(self) -> "Request":
        """This request for operands already multiplied by their scales (float32): no scales, a
        float32 product (the engine's fallback where no kernel applies block scales)."""
        f32 = np.dtype(np.float32)
        types = ResultTypes(f32, f32, f32, self.types.result)
        plain = replace(self, types=types, lhs_scale=None, rhs_scale=None)
        return replace(plain, epilogue=_epilogue(plain))


def _real(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"matmul: {name} must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"matmul: {name}={value!r} is out of the range of a float64") from None


def make_request(arrays: CallArrays, rules: Rules, options: CallOptions, plain: bool = False) -> Request:
    """Step 3: every check of a call's options (numpy's messages where it has one), after numpy's
    rules (``rules``); ``plain``: the call has no epilogue option at all."""
    precision = options.precision
    if precision not in MatmulProblem.PRECISIONS:
        raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {precision!r}")
    types = rules.types
    if precision == "fast_accum" and not (is_fp8(types.lhs) and is_fp8(types.rhs)):
        raise ValueError(f"precision='fast_accum' concerns fp8 operands (their tensor-core sums); got "
                         f"{types.lhs.name} and {types.rhs.name}")
    weights = arrays.b.array if arrays.quantized else None
    if plain:
        request = Request(rules.shape, types, precision, options.casting, 1.0, 0.0, None, None, 1, None, None, None,
                          arrays.out, IDENTITY, weights=weights)
        return request if rules.groups is None else _grouped(request, arrays, rules)
    shape = rules.shape
    activation = resolve_activation(options.activation)
    alpha = _real(options.alpha, "alpha")
    c_given = arrays.c is not None
    beta = 1.0 if options.beta is None and c_given else 0.0 if options.beta is None else _real(options.beta, "beta")
    if not c_given and beta != 0:
        raise ValueError(f"matmul: beta={beta} needs c (the array it scales); got c=None")
    bias_axis = options.bias_axis
    if isinstance(bias_axis, bool) or bias_axis not in (0, 1, -1, -2):
        raise ValueError(f"matmul: bias_axis must be -1 or 1 (one value per output column) or 0 or -2 "
                         f"(per output row), got {bias_axis!r}")
    axis = 1 if bias_axis in (1, -1) else 0
    c, bias = rules.c, rules.bias
    if c is not None and activation is not None and activation.arity == 2:
        raise ValueError(f"matmul: c is not supported with the gated activation {activation!r} (it pairs the "
                         f"GEMM's columns, which c would have to match); add it to the result instead")
    for label, term, target in (("c", c, shape.out_shape), ("mul", rules.mul, shape.value_shape)):
        if term is None:
            continue
        try:
            fits = np.broadcast_shapes(tuple(term.shape), target) == tuple(target)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"matmul: {label} of shape {tuple(term.shape)} does not broadcast to the "
                             f"{'output' if label == 'c' else 'activation values'} shape {tuple(target)}")
    if bias is not None and rules.groups is None:
        want = shape.n if axis == 1 else shape.m
        if len(bias.shape) != 1 or bias.shape[0] != want:
            what = "columns (N" if axis == 1 else "rows (M"
            raise ValueError(f"matmul: bias must be 1-D with one value per output {what} = {want}) "
                             f"for bias_axis={bias_axis}, got shape {tuple(bias.shape)}")
    factor = 1.0
    for label, scale in (("scale_a", rules.lhs_scale), ("scale_b", rules.rhs_scale)):
        if scale is not None and scale.number is not None:
            if not math.isfinite(scale.number):
                raise ValueError(f"matmul: {label}={scale.number} is not finite; (a * {label}) @ b mixes "
                                 f"infinities and NaN where the kernel would scale the sums: pass finite scales")
            factor *= scale.number
        elif scale is not None and scale.array.host and not np.isfinite(
                np.asarray(scale.array.array, np.float32)).all():
            raise ValueError(f"matmul: {label} holds values that are not finite; (a * {label}) @ b mixes "
                             f"infinities and NaN where the kernel would scale the sums: pass finite scales")
    lhs_scale, rhs_scale = (s if s is not None and s.array is not None else None
                            for s in (rules.lhs_scale, rules.rhs_scale))
    request = Request(shape, types, precision, options.casting, alpha * factor, beta, c, bias, axis, activation,
                      lhs_scale, rhs_scale, arrays.out, IDENTITY, weights=weights, mul=rules.mul)
    if rules.groups is not None:
        request = _grouped(request, arrays, rules)
    return replace(request, epilogue=_epilogue(request))


def _grouped(request: Request, arrays: CallArrays, rules: Rules) -> Request:
    """A grouped call's request: its offsets or counts checked (integers, on any device), its bias
    and row scale shapes (epilogue/grouped_terms.py), the terms that vary per group."""
    g, extents = rules.groups, arrays.groups
    label = "counts" if g.layout == "masked" else "offsets"
    if g.layout == "masked" and request.out is not None and request.out.dtype != request.types.result:
        raise TypeError(f"grouped_matmul: a masked call leaves out's rows past each count as they are, so out must have "
                        f"the result dtype {request.types.result.name}, not {request.out.dtype.name}")
    if extents.dtype.kind not in "iu" or extents.dtype.itemsize not in (4, 8):
        raise TypeError(f"grouped_matmul: {label} must hold 32- or 64-bit integers, got dtype {extents.dtype.name!r}")
    per_group = set()
    if request.bias is not None:
        kind = column_kind if request.bias_axis == 1 else row_kind
        if kind("bias", request.bias.shape, g):
            per_group.add("bias")
    row_scale = arrays.row_scale
    if row_scale is not None:
        if row_scale.dtype.kind != "f":
            raise TypeError(f"grouped_matmul: row_scale must hold floating-point values, got dtype {row_scale.dtype.name!r}")
        if row_kind("row_scale", row_scale.shape, g):
            per_group.add("row_scale")
        if row_scale.host and not np.isfinite(np.asarray(row_scale.array, np.float64)).all():
            raise ValueError("grouped_matmul: row_scale holds values that are not finite")
    for name, scale in (("lhs_scale", request.lhs_scale), ("rhs_scale", request.rhs_scale)):
        if scale is not None and scale.per_group:
            per_group.add(name)
    return replace(request, groups=g, extents=extents, row_scale=row_scale, per_group=frozenset(per_group))


def _epilogue(request: Request) -> Epilogue:
    """The kernels' epilogue for a checked request (c and bias element types from their arrays)."""
    plain = (request.alpha == 1 and request.c is None and request.bias is None and request.activation is None
             and request.lhs_scale is None and request.rhs_scale is None and request.row_scale is None
             and request.mul is None)
    if plain:
        return IDENTITY
    out = element_type(request.types.result).compute
    c = element_type(request.c.dtype) if request.c is not None else None
    bias = element_type(request.bias.dtype) if request.bias is not None else None
    mul = element_type(request.mul.dtype) if request.mul is not None else None
    if out == "i32":
        raise TypeError("matmul: alpha, c, bias, mul, activation and scales need a floating-point result "
                        "(pass out_dtype=numpy.float32)")
    words = {out} | {et.compute for et in (c, bias, mul) if et is not None}
    return Epilogue(scaled=request.alpha != 1, c=c, bias=bias, bias_axis=request.bias_axis,
                    activation=request.activation, compute="f64" if "f64" in words else "f32",
                    lhs_scale=_scale_kind(request.lhs_scale), rhs_scale=_scale_kind(request.rhs_scale),
                    row_scale=request.row_scale is not None, grouped=request.groups is not None, mul=mul)


def _scale_kind(scale) -> str:
    """The epilogue's word for a `Scale`: "" (none), "block", else "vector"."""
    return "" if scale is None else "block" if scale.kind == "block" else "vector"


def make_list_request(arrays: ListArrays, sizes: tuple, types: ResultTypes, options: CallOptions,
                      given: tuple[str, ...] = ()) -> Request:
    """Step 3 of a list-layout grouped call: its options (``alpha`` and ``activation`` only; the
    names in ``given`` are the other epilogue arguments the caller passed, refused), the shape of
    its packed result (every group's m x n, one after another)."""
    if given:
        raise ValueError(f"grouped_matmul: the list layout takes alpha and activation as its epilogue, not "
                         f"{', '.join(given)}")
    if options.precision not in MatmulProblem.PRECISIONS:
        raise ValueError(f"precision: expected one of {MatmulProblem.PRECISIONS}, got {options.precision!r}")
    if options.precision == "fast_accum" and not (is_fp8(types.lhs) and is_fp8(types.rhs)):
        raise ValueError("precision='fast_accum' concerns fp8 operands (their tensor-core sums)")
    big = [max(s[i] for s in sizes) for i in range(3)]
    shape = CallShape((len(sizes),), big[0], big[1], big[2], (0,), False, False)
    groups = GroupShape("list", len(sizes), *big)
    request = Request(shape, types, options.precision, options.casting, _real(options.alpha, "alpha"), 0.0, None,
                      None, 1, resolve_activation(options.activation), None, None, None, IDENTITY, groups=groups,
                      sizes=tuple(sizes))
    request = replace(request, epilogue=_epilogue(request))
    total = sum(m * request.epilogue.out_columns(n) for m, n, _ in sizes)
    return replace(request, shape=replace(shape, out_shape=(total,)))
