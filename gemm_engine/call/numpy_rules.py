"""numpy's matmul rules, on shapes and dtypes only (no device, no launch): step 2 of a call.

`apply` gives a call's `Rules`: operand ranks, the core dimension and broadcast of batch dimensions
(`call_shape`), the kinds of the operands' scales (by their shapes), the weak typing of Python
numbers given for ``c`` and ``bias`` (NEP 50), ``out``'s shape and dtype, and the one dtype rule
(`result_types`): what the kernel reads each operand as, the product's type and the type the call
returns after ``c``, ``bias``, scales and ``out_dtype``. The messages follow numpy's.

The result dtype is numpy's with the exceptions a GEMM library makes: int8 @ int8 gives int32
(exact 32-bit accumulation; numpy wraps around in int8), fp8 @ fp8 gives float32, scaled int8
(W8A8) and block-scaled operands give float32, and bfloat16 @ bfloat16 stays bfloat16.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from ..dtypes import SUPPORTED_NAMES, WIDENED, bfloat16_dtype, element_type, is_fp8
from ..epilogue.activations import Derivative, resolve_activation
from ..epilogue.grouped_terms import GroupShape, grouped_scale
from ..epilogue.scales import Scale, check_scale
from ..tensors import torch_numpy_dtype
from .arrays import CallArrays, Imported, ListArrays

_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"
CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


@dataclass(frozen=True)
class CallShape:
    """The shape side of one matmul call after numpy's rules. Sizes are ints, or a tracer's
    symbolic ints (torch.compile's fake implementations run these rules too: nothing here needs
    their values beyond comparisons)."""

    batch_shape: tuple[int, ...]
    m: int
    n: int
    k: int
    out_shape: tuple[int, ...]
    lhs_vector: bool    # lhs was 1-D: a row of length k was prepended a 1 and is removed again
    rhs_vector: bool
    #: The shape of the activation's values, which ``mul`` broadcasts to: the output's, but with
    #: half the columns for a gated activation's derivative (one value per column pair).
    value_shape: tuple[int, ...] = ()

    @property
    def batch(self) -> int:
        return math.prod(self.batch_shape)

    @property
    def empty(self) -> bool:
        """Nothing to multiply: an empty output or K = 0 (no kernel runs)."""
        return self.batch == 0 or self.m == 0 or self.n == 0 or self.k == 0


def broadcast_shapes(x: tuple, y: tuple) -> tuple:
    """numpy's broadcast of two shapes (ValueError where they do not), on ints or symbolic ints."""
    out = []
    for i in range(1, max(len(x), len(y)) + 1):
        p = x[-i] if i <= len(x) else 1
        q = y[-i] if i <= len(y) else 1
        if p == 1:
            out.append(q)
        elif q == 1 or p == q:
            out.append(p)
        else:
            raise ValueError(f"shapes {tuple(x)} and {tuple(y)} do not broadcast")
    return tuple(reversed(out))


def _size(x):
    return int(x) if isinstance(x, np.integer) else x


def call_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...], pairs: int = 0) -> CallShape:
    """numpy's matmul shapes; ``pairs``: 1 for a gated activation (the output has half of b's
    columns, gate and up interleaved), 2 for its derivative (all of them; one value per pair)."""
    for i, shape in enumerate((a_shape, b_shape)):
        if len(shape) == 0:
            raise ValueError(f"matmul: Input operand {i} does not have enough dimensions "
                             f"(has 0, gufunc core with signature {_SIGNATURE} requires 1)")
    lhs_vector, rhs_vector = len(a_shape) == 1, len(b_shape) == 1
    a2 = (1,) + tuple(a_shape) if lhs_vector else tuple(a_shape)
    b2 = tuple(b_shape) + (1,) if rhs_vector else tuple(b_shape)
    m, k = (_size(x) for x in a2[-2:])
    k2, n = (_size(x) for x in b2[-2:])
    if k != k2:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                         f"signature {_SIGNATURE} (size {k2} is different from {k})")
    try:
        batch_shape = tuple(_size(x) for x in broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise ValueError(f"matmul: operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {tuple(a_shape)}->{a2} {tuple(b_shape)}->{b2}") from None
    if pairs and n % 2:
        raise ValueError(f"matmul: a gated activation pairs b's columns (gate and up interleaved, 2j and 2j + 1), "
                         f"so b needs an even number of columns; got N = {n}")
    values = n // 2 if pairs else n

    def shaped(columns):
        return batch_shape + (() if lhs_vector else (m,)) + (() if rhs_vector else (columns,))

    out_shape = shaped(values if pairs == 1 else n)
    return CallShape(batch_shape, m, n, k, out_shape, lhs_vector, rhs_vector, shaped(values))


@dataclass(frozen=True)
class ResultTypes:
    """The dtypes of one call: ``lhs`` / ``rhs`` what the kernel reads the operands as, ``product``
    the type of ``a @ b`` (scaled), ``result`` what the call returns."""

    lhs: np.dtype
    rhs: np.dtype
    product: np.dtype
    result: np.dtype


def product_dtype(a_dtype, b_dtype) -> np.dtype:
    """numpy's result dtype of ``a @ b``, if both operands and the result are types the engine
    computes: the deviations from numpy are int8 @ int8 -> int32 and fp8 @ fp8 (either kind, mixed
    too) -> float32; fp8 with any other type is refused."""
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


#: Kept as its old name: the product rule is what callers of the two-operand rule mean.
result_dtype = product_dtype

_KNOWN = {np.dtype(n) for n in ("float32", "float64", "float16")}
_BFLOAT16 = bfloat16_dtype()


def operand_dtypes(a_dtype, b_dtype, product) -> tuple[np.dtype, np.dtype]:
    """The dtypes a kernel reads its operands in: each its own where the product widens them (int8,
    fp8: `WIDENED`), else both the product's (numpy's promotion)."""
    a, b = np.dtype(a_dtype), np.dtype(b_dtype)
    if a in WIDENED and b in WIDENED and WIDENED[a] == WIDENED[b] == product:
        return a, b
    return np.dtype(product), np.dtype(product)


def result_types(a_dtype, b_dtype, *, c=None, bias=None, scales: str = "", out_dtype=None,
                 casting: str = "same_kind", mul=None) -> ResultTypes:
    """The one dtype rule of a call. ``c`` / ``bias`` / ``mul``: their dtypes (None: absent); ``scales``: ""
    (none), "vector" (per tensor, row or column) or "block" (per 128 of K); ``out_dtype``: the
    caller's (None: numpy's promotion of the product with c and bias), which ``casting`` must allow."""
    product = product_dtype(a_dtype, b_dtype)
    if scales == "block" or (scales and product.kind in "iu"):
        product = np.dtype(np.float32)     # scaled int8 (W8A8) and block scales: float32
    lhs, rhs = operand_dtypes(a_dtype, b_dtype, product)
    natural = product
    extras = [np.dtype(x) for x in (c, bias, mul) if x is not None]
    if extras and product.kind in "iu" and out_dtype is None:
        raise TypeError(f"matmul: c, bias and mul need a floating-point result; {product.name} products take "
                        f"no epilogue terms (pass out_dtype=numpy.float32)")
    for extra in extras:
        if extra.name not in SUPPORTED_NAMES + ("int32",):
            raise TypeError(f"matmul: c / bias / mul have dtype {extra.name!r}; supported dtypes are "
                            f"{', '.join(SUPPORTED_NAMES)}")
        if natural.kind not in "iu":
            natural = product_dtype(natural, extra)
    if out_dtype is None:
        return ResultTypes(lhs, rhs, product, natural)
    out = check_out_dtype(out_dtype)
    if not np.can_cast(natural, out, casting=casting):
        raise TypeError(f"matmul: cannot cast the result from dtype({natural.name!r}) to out_dtype "
                        f"dtype({out.name!r}) with casting rule {casting!r} (numpy's rule; pass "
                        f"casting='unsafe' to allow it)")
    return ResultTypes(lhs, rhs, product, out)


#: The dtypes a call may return (`out_dtype`): every element type but the fp8 operand types.
RESULT_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int8")


def check_out_dtype(out_dtype) -> np.dtype:
    """``out_dtype`` (a numpy or torch dtype, or a name) as a dtype the engine stores results in;
    TypeError naming it otherwise."""
    if type(out_dtype).__module__ == "torch":
        out_dtype = torch_numpy_dtype(out_dtype)
    try:
        out = np.dtype(out_dtype)
    except TypeError:
        out = None
    if out is not None and is_fp8(out):
        raise TypeError(f"matmul: out_dtype {out.name}: fp8 is an operand type only (results are float32, "
                        f"bfloat16 or float16)")
    if out is None or out.name not in RESULT_NAMES or (out.name == "bfloat16" and out != _BFLOAT16):
        raise TypeError(f"matmul: out_dtype {out_dtype!r} is not a result dtype; expected one of "
                        f"{', '.join(RESULT_NAMES)}")
    return out


def check_casting(casting) -> str:
    if casting not in CASTINGS:
        raise ValueError(f"casting: expected 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got {casting!r}")
    return casting


def check_out(out_shape, out_dtype, result: np.dtype, expected_shape, casting: str = "same_kind") -> None:
    """numpy's checks of a given ``out``: its shape, and a dtype ``result`` casts to under ``casting``."""
    if tuple(out_shape) != tuple(expected_shape):
        raise ValueError(f"matmul: out has shape {tuple(out_shape)}, expected {tuple(expected_shape)}")
    if is_fp8(out_dtype):
        raise TypeError(f"matmul: out has dtype {np.dtype(out_dtype).name}; fp8 is an operand type only "
                        f"(results are float32, bfloat16 or float16)")
    if not np.can_cast(result, out_dtype, casting=casting):
        raise TypeError(f"matmul: cannot cast the result from dtype {result.name!r} to out's dtype "
                        f"{np.dtype(out_dtype).name!r} with casting rule {casting!r}")


@dataclass(frozen=True)
class Rules:
    """A call after numpy's rules: its shape, its dtypes, ``c``, ``bias`` and ``mul`` as arrays of
    their dtypes (None where absent, or ``c`` where ``beta`` is 0: it is not read), and the
    operands' checked scales."""

    shape: CallShape
    types: ResultTypes
    c: Imported | None
    bias: Imported | None
    lhs_scale: Scale | None
    rhs_scale: Scale | None
    #: A grouped call's layout and sizes (None: a dense call).
    groups: GroupShape | None = None
    mul: Imported | None = None


def pairs_of(activation) -> int:
    """`call_shape`'s ``pairs`` for an activation (an `Activation` or None): 0 elementwise, 1 a gated
    one, 2 a gated one's derivative."""
    if activation is None or activation.arity != 2:
        return 0
    return 2 if isinstance(activation, Derivative) else 1


def grouped_call_shape(a_shape, b_shape, groups_shape, layout: str, pairs: int = 0) -> tuple[CallShape, GroupShape]:
    """The shapes of a grouped call (``groups_shape``: its offsets' or counts'; ``layout``: "offsets"
    for "contiguous" or "k", told apart by b's rank, or "masked"): "contiguous" a (M, K)
    and b (groups, K, N) -> (M, N); "masked" a (groups, M, K), b (groups, K, N) -> (groups, M, N);
    "k" a (M, K), b (K, N) -> (groups, M, N); ``pairs`` as `call_shape`'s (a gated activation: N / 2
    output columns). ValueError naming the argument that does not fit."""
    a_shape, b_shape, groups_shape = (tuple(int(x) for x in s) for s in (a_shape, b_shape, groups_shape))
    if layout == "offsets":      # rows grouped (b per group) or the reduction (one b)
        layout = "k" if len(b_shape) == 2 else "contiguous"
    ranks = {"contiguous": (2, 3), "masked": (3, 3), "k": (2, 2)}[layout]
    given = "counts" if layout == "masked" else "offsets"
    if (len(a_shape), len(b_shape)) != ranks:
        raise ValueError(f"grouped_matmul: {layout} layout ({given} given) takes a {ranks[0]}-D a and a {ranks[1]}-D b, "
                         f"got shapes {a_shape} and {b_shape} (offsets with a 2-D a: b (groups, K, N) groups rows, "
                         f"b (K, N) groups the reduction; counts: a (groups, M, K), b (groups, K, N))")
    if len(groups_shape) != 1:
        raise ValueError(f"grouped_matmul: {given} must be 1-D (one entry per group), got shape {groups_shape}")
    groups = groups_shape[0]
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise ValueError(f"grouped_matmul: a's K = {k} and b's K = {k2} differ (shapes {a_shape} and {b_shape})")
    for label, shape in (("a", a_shape), ("b", b_shape)):
        if len(shape) == 3 and shape[0] != groups:
            raise ValueError(f"grouped_matmul: {label} has {shape[0]} groups (shape {shape}), {given} has {groups}")
    if pairs and n % 2:
        raise ValueError(f"grouped_matmul: a gated activation pairs b's columns (gate and up interleaved, 2j and "
                         f"2j + 1), so b needs an even number of columns; got N = {n}")
    batch_shape = () if layout == "contiguous" else (groups,)
    values = batch_shape + (m, n // 2 if pairs else n)
    out_shape = values if pairs == 1 else batch_shape + (m, n)
    return (CallShape(batch_shape, m, n, k, out_shape, False, False, values), GroupShape(layout, groups, m, n, k))


def apply(arrays: CallArrays, out_dtype=None, casting: str = "same_kind", beta=None, plain: bool = False,
          layout: str | None = None, activation=None) -> Rules:
    """numpy's rules for one call's arrays (``beta``: the caller's, only to know whether ``c`` is
    read; ``plain``: a call with no epilogue option at all; ``layout``: a grouped call's, whose
    ``arrays.groups`` holds its offsets or counts; ``activation``: the call's (or its name): a gated one
    changes the output's columns)."""
    check_casting(casting)
    if layout is None:
        shape, groups = call_shape(arrays.a.shape, arrays.b.shape, pairs_of(activation)), None
    else:
        shape, groups = grouped_call_shape(arrays.a.shape, arrays.b.shape, arrays.groups.shape, layout,
                                           pairs_of(resolve_activation(activation)))
    a, b = arrays.a.dtype, arrays.b.dtype
    if arrays.quantized:
        b = quantized_rhs_dtype(arrays)
    if plain:
        types = result_types(a, b)
        rules = Rules(shape, types, None, None, None, None)
    else:
        scales = tuple((check_scale(value, label, shape.m, shape.n, shape.k, lhs) if groups is None
                        else grouped_scale(value, label, groups, lhs)) for label, value, lhs in
                       (("scale_a", arrays.scale_a, True), ("scale_b", arrays.scale_b, False)))
        kinds = {s.kind for s in scales if s is not None}
        scaled = "block" if "block" in kinds else "vector" if kinds else ""
        product = result_types(a, b, scales=scaled).product
        c_read = arrays.c is not None and not (isinstance(beta, numbers.Real) and beta == 0)
        c = _weak(arrays.c, product, "c") if c_read else None
        bias = _weak(arrays.bias, product, "bias")
        mul = _weak(arrays.mul, product, "mul")
        types = result_types(a, b, c=None if c is None else c.dtype, bias=None if bias is None else bias.dtype,
                             scales=scaled, out_dtype=out_dtype, casting=casting,
                             mul=None if mul is None else mul.dtype)
        rules = Rules(shape, types, c, bias, *scales, mul=mul)
    if groups is not None:
        rules = replace(rules, groups=groups)
    if arrays.out is not None:
        check_out(arrays.out.shape, arrays.out.dtype, types.result, shape.out_shape, casting)
    return rules


#: Activation dtypes a quantized weight multiplies: its values are delivered in the activations' type.
QUANTIZED_ACTIVATIONS = ("float16", "bfloat16", "float32")


def quantized_rhs_dtype(arrays: CallArrays) -> np.dtype:
    """The dtype a quantized ``b`` is read as: the activations' own (16-bit fragments of the
    dequantized weights for 16-bit activations, float32 values for float32 ones)."""
    a = arrays.a.dtype
    if a.name not in QUANTIZED_ACTIVATIONS:
        raise TypeError(f"matmul: a quantized weight multiplies float16, bfloat16 or float32 activations, "
                        f"got {a.name}")
    if arrays.scale_a is not None or arrays.scale_b is not None:
        raise ValueError("matmul: scale_a / scale_b do not apply to a quantized weight (its scales are part of "
                         "it; pass alpha for a number)")
    return a


def _weak(x, product: np.dtype, label: str) -> Imported | None:
    """numpy's rule for Python numbers (NEP 50): an ``int`` or ``float`` given for ``c``, ``bias`` or ``mul``
    takes the product's dtype where it is of that kind or narrower (``c=1.0`` with float32 operands
    keeps a float32 result); arrays keep their dtype, which must be one the engine reads."""
    if x is None:
        return None
    if isinstance(x, Imported):
        if x.dtype.name not in SUPPORTED_NAMES and x.dtype.name != "int32":
            raise TypeError(f"matmul: {label} has dtype {x.dtype.name!r}; supported dtypes are "
                            f"{', '.join(SUPPORTED_NAMES)}")
        return x
    if product.kind == "f" or (type(x) is int and product.kind in "iu"):
        return Imported(np.asarray(x, dtype=product), product, True, "numpy", x)
    value = np.asarray(x)
    return Imported(value, value.dtype, True, "numpy", x)


def list_rules(arrays: ListArrays, out_dtype=None, casting: str = "same_kind",
               activation=None) -> tuple[tuple, ResultTypes]:
    """numpy's rules for a list-layout grouped call: ((m, n, k) per group, the dtypes), every group
    a 2-D product of the same operand dtypes; each given out checked as matmul checks one (N / 2
    columns under a gated ``activation``, each group's N even)."""
    pairs = pairs_of(resolve_activation(activation))
    check_casting(casting)
    sizes = []
    for i, (x, y) in enumerate(zip(arrays.a, arrays.b)):
        if len(x.shape) != 2 or len(y.shape) != 2:
            raise ValueError(f"grouped_matmul: the list layout takes 2-D arrays; a[{i}] has shape {tuple(x.shape)}, "
                             f"b[{i}] {tuple(y.shape)}")
        if x.shape[1] != y.shape[0]:
            raise ValueError(f"grouped_matmul: a[{i}] {tuple(x.shape)} and b[{i}] {tuple(y.shape)} differ in K")
        if pairs and y.shape[1] % 2:
            raise ValueError(f"grouped_matmul: a gated activation pairs b's columns (gate and up interleaved, 2j and "
                             f"2j + 1), so each b[i] needs an even number of columns; b[{i}] has {y.shape[1]}")
        sizes.append((int(x.shape[0]), int(y.shape[1]), int(x.shape[1])))
    for label, side in (("a", arrays.a), ("b", arrays.b)):
        kinds = {x.dtype for x in side}
        if len(kinds) > 1:
            raise TypeError(f"grouped_matmul: every {label}[i] must have one dtype, got {sorted(k.name for k in kinds)}")
    if not sizes:
        raise ValueError("grouped_matmul: the list layout needs at least one group")
    types = result_types(arrays.a[0].dtype, arrays.b[0].dtype, out_dtype=out_dtype, casting=casting)
    for i, (o, (m, n, _)) in enumerate(zip(arrays.out or (), sizes)):
        check_out(o.shape, o.dtype, types.result, (m, n // 2 if pairs == 1 else n), casting)
    return tuple(sizes), types
