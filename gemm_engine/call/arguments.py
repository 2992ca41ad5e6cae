"""The arguments step: every kernel argument of one call, typed and named once, for every launch path.

The kernels write a (batch, M, N) array (`result_target`): ``out`` itself where the prepare step
found they may (call/prepare.py `writes_in_place`: a device array of the result dtype, C-contiguous
or with rows the kernels address by its strides, views.py `out_view`, that no input overlaps, as
numpy computes as if the inputs were copied first), else a fresh contiguous array: a torch tensor
for a torch caller on the device, a runtime array otherwise.

`CallArguments` is built once per call from the prepared arrays (`build_arguments`) and names its
values by one rule, the rule the kernel signature's parameters follow (codegen/signature.py):

* an array field ``x`` gives ``x_base`` (the buffer), ``x_offset`` (its first element, in
  elements) and one ``x_<name>`` per index of its view (``lhs_ld``, ``lhs_batch_stride``,
  ``c_row_stride``, ``bias_stride``...);
* sizes and the epilogue's scalars give their own names (``M``, ``N``, ``K``, ``batch``,
  ``alpha``, ``beta``).

Repeated calls with the same metadata (call/launch.py `CallPlan`) keep every value but the
per-call ones (`PER_CALL`) from their first call's `CallArguments`, and get those from
`per_call_values`, which applies the same rule to the caller's new arrays: a new per-call argument
is a field of the request and of this class, and a parameter of the signature, nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..dtypes import bits_dtype
from ..tensors import numpy_torch_dtype, torch_bits
from ..views import out_view
from .arrays import CallArrays, Imported
from .prepare import Prepared


class EpilogueInputs(NamedTuple):
    """A call's epilogue inputs as the caller gave them (the fast paths' per-call values)."""

    alpha: object
    beta: object
    c: object
    bias: object
    scale_a: object
    scale_b: object
    mul: object = None
    row_scale: object = None      # a grouped call's per-row scale


#: The call input that feeds each epilogue array field (the caller's keyword -> the kernel's name).
EPILOGUE_ARRAYS = (("c", "c"), ("bias", "bias"), ("lhs_scale", "scale_a"), ("rhs_scale", "scale_b"), ("mul", "mul"),
                   ("row_scale", "row_scale"))
#: The epilogue inputs a Python number may stand for, folded into alpha (the operands' scales).
NUMBER_SCALES = ("scale_a", "scale_b")
#: The array fields the caller's operands and output feed.
OPERAND_ARRAYS = ("lhs", "rhs", "out")
#: The array fields of a quantized rhs beside its packed words (the ``rhs`` field): scales, zeros.
WEIGHT_ARRAYS = ("qscale", "qzero")


@dataclass(frozen=True)
class ArrayArgument:
    """One array the kernels read or write: the device array (or its address) and its index
    parameters by suffix (``(("ld", 512), ("batch_stride", 0))``)."""

    array: object
    indices: tuple[tuple[str, int], ...] = ()


def _array_values(name: str, array, address) -> tuple:
    """(``name_base``, ``name_offset``) keys and values of one array (``address(x)``: the runtime's
    (kernel argument, element offset))."""
    ptr, offset = address(array)
    return (f"{name}_base", ptr), (f"{name}_offset", offset)


#: Parameter names of the per-call fields, formatted once (the fast paths run them every call).
_BASE_OFFSET = {name: (f"{name}_base", f"{name}_offset")
                for name in OPERAND_ARRAYS + WEIGHT_ARRAYS + tuple(n for n, _ in EPILOGUE_ARRAYS)}


#: A grouped call's per-call offsets or counts (`CallArguments.groups`).
GROUP_NAMES = ("groups_base", "groups_offset")
#: A quantized weight's scales' and zeros' parameters, in `WEIGHT_ARRAYS` order.
WEIGHT_NAMES = tuple(n for op in WEIGHT_ARRAYS for n in _BASE_OFFSET[op])

#: The parameters `epilogue_values` sets (a fused call's per-call epilogue values).
EPILOGUE_NAMES = frozenset({"alpha", "beta"} | {n for op, _ in EPILOGUE_ARRAYS for n in _BASE_OFFSET[op]})


@dataclass(frozen=True)
class CallArguments:
    """Every argument of one call's kernels (see the module docstring for how they are named)."""

    lhs: ArrayArgument
    rhs: ArrayArgument
    out: ArrayArgument
    M: int
    N: int
    K: int
    batch: int
    alpha: float = 1.0
    beta: float = 0.0
    c: ArrayArgument | None = None
    bias: ArrayArgument | None = None
    lhs_scale: ArrayArgument | None = None
    rhs_scale: ArrayArgument | None = None
    mul: ArrayArgument | None = None
    #: Whether the kernels take the epilogue's arguments (a fused call).
    fused: bool = field(default=False)
    #: A grouped call's offsets or counts (``groups_base``, ``groups_offset``: problem.py `Groups`)
    #: and its per-row scale (``row_scale_*``, with the epilogue's arguments).
    groups: ArrayArgument | None = None
    row_scale: ArrayArgument | None = None
    #: A quantized rhs's scales and zeros (``rhs`` holds its packed words), or None.
    qscale: ArrayArgument | None = None
    qzero: ArrayArgument | None = None

    def values(self, address) -> dict:
        """Every parameter value by name (``address(x)``: the runtime's (kernel argument, element
        offset) of an array)."""
        out = {"M": self.M, "N": self.N, "K": self.K, "batch": self.batch}
        arrays = [(n, getattr(self, n)) for n in OPERAND_ARRAYS + WEIGHT_ARRAYS]
        if self.fused:
            out.update(alpha=self.alpha, beta=self.beta)
            arrays += [(n, getattr(self, n)) for n, _ in EPILOGUE_ARRAYS]
        arrays.append(("groups", self.groups))
        for name, arg in arrays:
            if arg is None:
                continue
            out.update(_array_values(name, arg.array, address))
            out.update((f"{name}_{suffix}", value) for suffix, value in arg.indices)
        return out

    def per_call_names(self) -> frozenset:
        """The parameters that change between calls of one call plan: the arrays' addresses, and a
        fused call's epilogue scalars and arrays."""
        names = {n for op in OPERAND_ARRAYS for n in _BASE_OFFSET[op]}
        names |= {n for op in WEIGHT_ARRAYS if getattr(self, op) is not None for n in _BASE_OFFSET[op]}
        if self.fused:
            names |= {"alpha", "beta"} | {n for op, _ in EPILOGUE_ARRAYS for n in _BASE_OFFSET[op]}
        for name in ("groups", "row_scale"):
            if getattr(self, name) is not None:
                names |= {f"{name}_base", f"{name}_offset"}
        return frozenset(names)


def per_call_values(lhs, rhs, out, inputs: EpilogueInputs | None, address, groups=None, weight=()) -> dict:
    """The per-call values (`CallArguments.per_call_names`) of a repeated call: its operands and
    output, (a fused call) its epilogue inputs as given (number scales fold into alpha), (a
    grouped call) its offsets or counts and (a quantized rhs, its packed words ``rhs``) the
    weight's scales and zeros (``weight``, in `WEIGHT_ARRAYS` order, None where it has none),
    named as `CallArguments.values` names them."""
    values = {}
    for name, x in zip(OPERAND_ARRAYS + WEIGHT_ARRAYS, (lhs, rhs, out, *weight)):
        if x is None:
            continue
        base, offset = _BASE_OFFSET[name]
        values[base], values[offset] = address(x)
    if inputs is not None:
        values.update(epilogue_values(inputs, address))
    if groups is not None:
        values[GROUP_NAMES[0]], values[GROUP_NAMES[1]] = address(groups)
    return values


def epilogue_values(inputs: EpilogueInputs, address) -> dict:
    """A fused call's epilogue values from the caller's inputs (the strides are the call plan's)."""
    alpha = float(inputs.alpha)
    values = {"beta": 1.0 if inputs.beta is None else float(inputs.beta)}
    for name, keyword in EPILOGUE_ARRAYS:
        x = getattr(inputs, keyword)
        if x is None:
            continue
        if type(x) in (float, int):
            alpha *= x            # a number scale (`Request` folds it into alpha too; fast.py: only scales)
        else:
            base, offset = _BASE_OFFSET[name]
            values[base], values[offset] = address(x)
    values["alpha"] = alpha
    return values


def operand_argument(op) -> ArrayArgument:
    """An operand (call/prepare.py `DeviceOperand`) as the kernels read it."""
    return ArrayArgument(op.array, (("ld", op.view.ld), ("batch_stride", op.view.batch_stride)))


def output_argument(target, problem) -> ArrayArgument:
    """The output: a (batch, M, N) device array (N / 2 columns for a gated epilogue), contiguous or
    the caller's ``out`` with strides of its own (`out_view`); a contiguous grouped call's: one (M, N)."""
    contiguous = problem.groups is not None and problem.groups.layout == "contiguous"
    n = problem.epilogue.out_columns(problem.n)
    if not target.flags.c_contiguous:
        view = out_view(target, problem, 0)
        return ArrayArgument(target, (("ld", view.ld), ("batch_stride", view.batch_stride)))
    return ArrayArgument(target, (("ld", n), ("batch_stride", 0 if contiguous else problem.m * n)))


def plain_arguments(lhs, rhs, target, problem) -> CallArguments:
    """The arguments of a plain product (no epilogue) of device operands into ``target``."""
    return CallArguments(operand_argument(lhs), operand_argument(rhs), output_argument(target, problem),
                         problem.m, problem.n, problem.k, problem.batch)


def build_arguments(runtime, arrays: CallArrays, prepared: Prepared) -> tuple[CallArguments, Target]:
    """The `CallArguments` of a prepared call, and the `Target` its kernels write (a contiguous
    (batch, M, N) device array: ``out`` itself where it can be, see `result_target`)."""
    problem, request = prepared.problem, prepared.request
    target = result_target(runtime, arrays, prepared)

    def term(t, *names) -> ArrayArgument | None:
        if t is None:
            return None
        values = tuple(getattr(t.strides, n) for n in names) if len(names) > 1 else (t.strides,)
        return ArrayArgument(t.array, tuple(zip(names, values)))

    vector = ("stride", "group_stride") if problem.groups is not None else ("stride",)
    return CallArguments(
        operand_argument(prepared.lhs), operand_argument(prepared.rhs), output_argument(target.array, problem),
        problem.m, problem.n, problem.k, problem.batch,
        alpha=request.alpha, beta=request.beta,
        c=term(prepared.c, "row_stride", "col_stride", "batch_stride"),
        bias=term(prepared.bias, *vector),
        lhs_scale=term(prepared.lhs_scale, *vector), rhs_scale=term(prepared.rhs_scale, *vector),
        mul=term(prepared.mul, "row_stride", "col_stride", "batch_stride"),
        fused=not problem.epilogue.identity,
        groups=None if prepared.groups is None else ArrayArgument(prepared.groups.array),
        row_scale=term(prepared.row_scale, *vector),
        qscale=term(prepared.qscale, "ld", "batch_stride"), qzero=term(prepared.qzero, "ld", "batch_stride")), target


@dataclass
class Target:
    """Where one call's kernels write: ``array`` (a device array), what the call returns when it has
    no ``out`` (``returned``), and whether ``array`` is the caller's ``out`` itself (``direct``)."""

    array: object
    returned: object
    direct: bool = False


def result_target(runtime, arrays: CallArrays, prepared: Prepared) -> Target:
    """The array the kernels write (see the module docstring)."""
    request = prepared.request
    out = request.out
    if out is not None and prepared.in_place:
        return Target(out.array, out.array, True)
    shape, dtype = request.shape.out_shape, request.dtype
    # A masked grouped call writes only each group's counted rows, a contiguous one only the rows
    # its offsets cover: the others are as they were in an ``out`` written through a temporary
    # (which starts as its copy), and zeros in a masked call's fresh result.
    layout = request.groups.layout if request.groups is not None else None
    masked = layout == "masked"
    like = arrays.like
    if like is not None and not arrays.host:
        import torch
        tensor = torch.empty(shape, dtype=numpy_torch_dtype(dtype), device=like.original.device)
        target = Target(runtime.from_dlpack(torch_bits(tensor), "result"), tensor)
    else:
        # Device libraries may lack bfloat16 and fp8: a host caller's result moves as its bits.
        bits = bits_dtype(dtype) if arrays.host else None
        array = runtime.empty(shape, dtype if bits is None else bits)
        target = Target(array, array)
    if layout in ("masked", "contiguous") and out is not None and out.dtype == dtype:
        runtime.copy_into(target.array, _as_result(runtime, out, target.array.dtype))
    elif masked:
        runtime.fill_zero(target.array)
    return target


def _as_result(runtime, out: Imported, storage):
    """A grouped call's ``out`` of the result's dtype as the temporary's storage holds it, on the
    device."""
    if out.host:
        return runtime.upload(np.ascontiguousarray(out.array).view(storage))
    return out.array
