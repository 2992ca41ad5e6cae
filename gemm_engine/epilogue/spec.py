"""Fused epilogue: ``act(alpha * sa[row] * sb[col] * acc + beta * c + bias) * mul * rs[row]``
applied to each accumulator on its way out (``sa`` / ``sb``: the dequantizing scales of a's rows and
b's columns, one value each when per tensor: stride 0; ``mul``: an array multiplying the result, e.g.
the upstream gradient of a backward pass through the activation's `Derivative`; ``rs``: a scale per
output row applied last, such as a mixture-of-experts routing weight).

Grouped problems (problem.py `Groups`): each array term may differ per group (a bias per expert, an
expert's weight scales), so each takes a ``<term>_group_stride`` parameter too (0: shared by the
groups) and its pointer moves to the group the batch level names (`pointers`).

A gated activation (``activation.arity == 2``, activations.py `Gated`) makes the epilogue *paired*:
the pre-activations ``z`` of the output columns 2j and 2j + 1 give one result, ``gate(z[2j]) *
z[2j + 1]`` at column j (``mul`` read at column j too), and the output has half the GEMM's columns
(`out_columns`); the derivative of one writes two results per pair (both columns). A paired
epilogue is stored through global_/write/pairs.py, never per element: `pre` and `pair_values`.

Operand scales per block of 128 along K (``lhs_scale`` / ``rhs_scale`` = "block") travel here too,
as the same kernel parameters, but the epilogue does not apply them: they change along K, so the
global level multiplies each block's partial product by them (`GlobalMatmul.applies_block_scales`;
every other global level is refused such a problem before launch, algorithms/base.py).

Contract
--------
An `Epilogue` is part of the problem (and so of the compile key) and reaches every kernel through
`GlobalMatmul.store`, the one place accumulators are written: no global matmul renders its own.
What changes between calls without recompiling (``alpha``, ``beta``, the arrays) are kernel
arguments; what changes the code (which terms exist, their element types, the activation) is in
the dataclass. The batch level declares the parameters (`params`) and moves the ``c`` pointer to
the batch entry (`pointers`); the store calls `apply` with the element's global row and column.

The arithmetic is a small inline function rendered once per kernel (`helpers`), so each term is
read once and the activation sees a plain variable.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..codegen.signature import SCALAR, Param, array, index
from ..dtypes import ElementType
from .activations import Activation, Derivative, Math

_FUNCTION = "ge_epilogue"
_PRE = "ge_epilogue_pre"
_PAIR = "ge_epilogue_pair"


@dataclass(frozen=True)
class Epilogue:
    scaled: bool = False                  # multiply the accumulator by the argument ``alpha``
    c: ElementType | None = None          # add ``beta * c[b, row, col]`` (any strides, 0 = broadcast)
    bias: ElementType | None = None       # add ``bias[col]`` (bias_axis 1) or ``bias[row]`` (0)
    bias_axis: int = 1
    activation: Activation | None = None
    compute: str = "f32"                  # compute word the epilogue's arithmetic runs in
    # Operand scales (float32): "" none; "vector": ``lhs_scale[row * lhs_scale_stride]`` (stride 0:
    # one value), ``rhs_scale[col * rhs_scale_stride]``; "block": (M, ceil(K/128)) and
    # (ceil(K/128), ceil(N/128)) row-major with leading dimension ``*_scale_stride``.
    lhs_scale: str = ""
    rhs_scale: str = ""
    mul: ElementType | None = None        # multiply the result by ``mul[b, row, col]`` (any strides)
    row_scale: bool = False               # multiply the result by ``row_scale[row]`` (float32), last
    grouped: bool = False                 # array terms move per group (``<term>_group_stride``)
    # c is the output itself and beta 1, nothing applied after the sum: a writer may add the rest
    # into the output (a reducing store) instead of reading c (`apply`'s ``c_value``).
    accumulate: bool = False

    def __post_init__(self):
        if self.bias_axis not in (0, 1):
            raise ValueError(f"Epilogue.bias_axis must be 0 (rows) or 1 (columns), got {self.bias_axis}")
        if self.paired and self.c is not None:
            raise ValueError(f"Epilogue: the gated activation {self.activation!r} pairs output columns; c (which "
                             f"the output's shape would index) is not supported with it")
        if self.accumulate and (self.c is None or self.activation or self.mul or self.row_scale):
            raise ValueError("Epilogue.accumulate: the output is c, added last (no activation, mul or row scale "
                             "after the sum)")

    @property
    def identity(self) -> bool:
        return not (self.scaled or self.c or self.bias or self.activation or self.lhs_scale
                    or self.rhs_scale or self.mul or self.row_scale)

    @property
    def paired(self) -> bool:
        """Whether results come from pairs of output columns (a gated activation or its derivative)."""
        return self.activation is not None and self.activation.arity == 2

    @property
    def pair_outputs(self) -> int:
        """Results written per column pair: 1 (a gated activation), 2 (its derivative)."""
        return 2 if self.paired and isinstance(self.activation, Derivative) else 1

    def out_columns(self, n):
        """The output's columns for a GEMM of ``n`` columns (half of them for a gated activation)."""
        return n // 2 if self.paired and self.pair_outputs == 1 else n

    @property
    def grouped_terms(self) -> tuple[str, ...]:
        """The array terms that move per group (a grouped epilogue's bias, scales and row scale; c
        moves by its batch stride, as in a batched product)."""
        if not self.grouped:
            return ()
        return tuple(n for n, on in (("bias", self.bias is not None), ("lhs_scale", self.lhs_scale),
                                     ("rhs_scale", self.rhs_scale), ("row_scale", self.row_scale)) if on)

    @property
    def scales(self) -> tuple[str, ...]:
        """The scale arrays the kernel takes: "lhs_scale", "rhs_scale"."""
        return tuple(n for n, kind in (("lhs_scale", self.lhs_scale), ("rhs_scale", self.rhs_scale)) if kind)

    @property
    def vector_scales(self) -> tuple[str, ...]:
        """The scale arrays this epilogue multiplies by (per row of a, per column of b)."""
        return tuple(n for n, kind in (("lhs_scale", self.lhs_scale), ("rhs_scale", self.rhs_scale))
                     if kind == "vector")

    @property
    def block_scales(self) -> bool:
        """Whether the global level must apply per-128-K-block scales (see the module docstring)."""
        return "block" in (self.lhs_scale, self.rhs_scale)

    @property
    def element_types(self) -> tuple[ElementType, ...]:
        return tuple(et for et in (self.c, self.bias, self.mul) if et is not None)

    # -- rendering ------------------------------------------------------------------------------
    def params(self) -> tuple:
        """The kernel parameters the epilogue appends to the batch level's signature: ``alpha``;
        c's pointer, offset, strides and ``beta``; bias's pointer, offset and stride (those of the
        terms it has). The host supplies them under these names (engine: `epilogue_values`)."""
        out = []
        if self.scaled:
            out.append(Param("alpha", SCALAR, self.compute))
        if self.c is not None:
            out += [array("c_base", self.c.storage), *index("c_offset", "c_row_stride", "c_col_stride",
                                                            "c_batch_stride"), Param("beta", SCALAR, self.compute)]
        if self.bias is not None:
            out += [array("bias_base", self.bias.storage), *index("bias_offset", "bias_stride")]
        for name in self.scales + (("row_scale",) if self.row_scale else ()):
            out += [array(f"{name}_base", "f32"), *index(f"{name}_offset", f"{name}_stride")]
        out += index(*(f"{name}_group_stride" for name in self.grouped_terms))
        if self.mul is not None:
            out += [array("mul_base", self.mul.storage), *index("mul_offset", "mul_row_stride", "mul_col_stride",
                                                                "mul_batch_stride")]
        return tuple(out)

    def pointers(self, d: Dialect, batch: str = "b") -> list[str]:
        """Statements (after the batch index ``batch`` is known) that define ``c`` and ``bias``."""
        out = []
        if self.c is not None:
            out.append(f"const GLOBAL {d.storage_type(self.c)}* c = c_base + c_offset + {batch} * c_batch_stride;")
        # bias and the scales never overlap the output (the arguments step writes through a temporary
        # where an output would overlap an input): RESTRICT lets the compiler load them once per
        # element index and ahead of the stores, instead of again after each (H100, fp8 8192^3
        # rowwise: 1.05 ms against 0.86 per-tensor before).
        moved = self.grouped_terms

        def at(name: str) -> str:
            return f"{name}_base + {name}_offset" + (f" + {batch} * {name}_group_stride" if name in moved else "")

        if self.bias is not None:
            out.append(f"const GLOBAL {d.storage_type(self.bias)}* RESTRICT bias = {at('bias')};")
        out += [f"const GLOBAL {d.c_type('f32')}* RESTRICT {name} = {at(name)};"
                for name in self.scales + (("row_scale",) if self.row_scale else ())]
        if self.mul is not None:
            out.append(f"const GLOBAL {d.storage_type(self.mul)}* mul = mul_base + mul_offset + {batch} * mul_batch_stride;")
        return out

    def helpers(self, d: Dialect, out=None) -> str:
        """The inline functions `apply` (or, paired, `pair_values`) calls (none for the identity).
        ``out``: the call's stored result's `ElementType` (the batch level's ``result``: a split-K
        partial is float32, the sums' store applies the epilogue); one of 16 bits or fewer lets the
        dialect use its fast math (`Math.fast`): its rounding is far coarser than theirs."""
        if self.identity:
            return ""
        t = d.c_type(self.compute)
        params, lines = self._pre_lines(t)
        m = Math(d, self.compute, fast=out is not None and out.itemsize <= 2 and out.compute == "f32")
        if self.paired:
            mul = [f"{t} mul_value"] if self.mul is not None else []
            pre = f"INLINE {t} {_PRE}({', '.join(params)}) {{\n    " + "\n    ".join(lines + ["return x;"]) + "\n}\n"
            act = self.activation
            if self.pair_outputs == 1:
                results = [act.render_pair("g", "u", m)]
            else:
                results = list(act.of.derivative_pair("g", "u", m))
            rs = [f"{t} row_scale"] if self.row_scale else []
            out = [pre]
            for i, result in enumerate(results):
                value = f"({result}) * mul_value" if self.mul is not None else result
                value = f"({value}) * row_scale" if self.row_scale else value    # last, as `apply`'s
                out.append(f"INLINE {t} {_PAIR}{i}({', '.join([f'{t} g', f'{t} u'] + mul + rs)}) {{\n"
                           f"    return {value};\n}}\n")
            return "".join(out)
        result = self.activation.render("x", m) if self.activation else "x"
        if self.mul is not None:
            params.append(f"{t} mul_value")
            result = f"({result}) * mul_value"
        if self.row_scale:           # last: the routing weight scales the expert's whole output
            params.append(f"{t} row_scale")
            lines.append(f"x = {result};")
            result = "x * row_scale"
        body = "\n    ".join(lines + [f"return {result};"])
        return f"INLINE {t} {_FUNCTION}({', '.join(params)}) {{\n    {body}\n}}\n"

    def _pre_lines(self, t: str) -> tuple[list[str], list[str]]:
        """(parameters, statements) of the pre-activation ``alpha * sa * sb * x + beta * c + bias``."""
        params = [f"{t} x"]
        lines = []
        for name in self.vector_scales:     # dequantize first: the scales belong to the operands
            params.append(f"{t} {name}")
            lines.append(f"x = x * {name};")
        if self.scaled:
            params.append(f"{t} alpha")
            lines.append("x = alpha * x;")
        if self.c is not None:
            params += [f"{t} c_value", f"{t} beta"]
            lines.append("x += beta * c_value;")
        if self.bias is not None:
            params.append(f"{t} bias_value")
            lines.append("x += bias_value;")
        return params, lines

    def apply(self, d: Dialect, value: str, row: str, col: str, hoist: dict | None = None,
              c_value: str | None = None, limits: tuple[str | None, str | None] = (None, None)) -> str:
        """Expression: the epilogue of accumulator ``value`` at global output (``row``, ``col``).
        ``hoist``: the scale values are read into variables first (`hoisted_scales` declares
        them): ``hoist`` maps (scale name, index expression) to the variable's name. ``c_value``:
        an expression standing for c there (an accumulating writer's 0: it adds into c itself).
        ``limits``: the rows' and columns' exclusive bounds (None: in range) where the element may lie
        past them and its value is never stored (a staging tile whose stores clip): the arrays read
        per element (c, bias, mul) are read at the last row or column instead, in range."""
        if self.identity:
            return value
        if self.paired:
            raise ValueError("Epilogue.apply: a paired epilogue is stored a column pair at a time "
                             "(global_/write/pairs.py)")
        at = tuple(_clamped(index, limit) for index, limit in zip((row, col), limits))
        args = self._pre_args(d, value, row, col, hoist, c_value, at)
        if self.mul is not None:
            args.append(self.mul_value(d, *at))
        if self.row_scale:
            args.append(f"row_scale[({row}) * row_scale_stride]" if hoist is None
                        else hoist.setdefault(("row_scale", row), f"ge_row_scale_{len(hoist)}"))
        return f"{_FUNCTION}({', '.join(args)})"

    def _pre_args(self, d: Dialect, value: str, row: str, col: str, hoist: dict | None,
                  c_value: str | None = None, at: tuple[str, str] | None = None) -> list[str]:
        """``at``: where c and bias are read (``row``, ``col`` unless `apply`'s limits move them)."""
        args, (c_row, c_col) = [value], at or (row, col)
        for name, index in (("lhs_scale", row), ("rhs_scale", col)):
            if name in self.vector_scales:
                if hoist is None:
                    args.append(f"{name}[({index}) * {name}_stride]")
                else:
                    args.append(hoist.setdefault((name, index), f"ge_{name}_{len(hoist)}"))
        if self.scaled:
            args.append("alpha")
        if self.c is not None:
            args += [c_value or d.load_global(self.c, "c", f"({c_row}) * c_row_stride + ({c_col}) * c_col_stride"),
                     "beta"]
        if self.bias is not None:
            index = c_col if self.bias_axis == 1 else c_row
            args.append(d.load_global(self.bias, "bias", f"({index}) * bias_stride"))
        return args

    def mul_value(self, d: Dialect, row: str, col: str) -> str:
        """Expression: ``mul`` at global (``row``, ``col``), in the compute type."""
        return d.load_global(self.mul, "mul", f"({row}) * mul_row_stride + ({col}) * mul_col_stride")

    def pre(self, d: Dialect, value: str, row: str, col: str, hoist: dict | None = None) -> str:
        """Expression (paired epilogues): the pre-activation of accumulator ``value`` at (``row``, ``col``)."""
        return f"{_PRE}({', '.join(self._pre_args(d, value, row, col, hoist))})"

    def pair_values(self, d: Dialect, g: str, u: str, row: str, pair: str, hoist: dict | None = None) -> list[str]:
        """Expressions (paired epilogues): the results of the pair whose pre-activations are the
        variables ``g`` and ``u``, at global ``row`` and pair index ``pair`` (where ``mul`` is read);
        ``hoist`` as `apply`'s (the row scale)."""
        extra = [self.mul_value(d, row, pair)] if self.mul is not None else []
        if self.row_scale:
            extra.append(f"row_scale[({row}) * row_scale_stride]" if hoist is None
                         else hoist.setdefault(("row_scale", row), f"ge_row_scale_{len(hoist)}"))
        return [f"{_PAIR}{i}({', '.join([g, u] + extra)})" for i in range(self.pair_outputs)]


def _clamped(index: str, limit: str | None) -> str:
    return index if limit is None else f"(({index}) < ({limit}) ? ({index}) : ({limit}) - 1)"


def hoisted_scales(hoist: dict, bounds: dict) -> list[str]:
    """Declarations of the scale values `Epilogue.apply` named in ``hoist``, each read once
    (``bounds``: scale name -> the index's exclusive bound where it must be checked, else absent;
    0 past it). Why: read per output element under its bounds check, they were a dependent load
    before each store (measured: bench/results/h100/low_precision.md, notes)."""
    out = []
    for (name, index), var in hoist.items():
        load = f"{name}[({index}) * {name}_stride]"
        if name in bounds:
            load = f"(({index}) < {bounds[name]} ? {load} : 0.0f)"
        out.append(f"const float {var} = {load};")
    return out


IDENTITY = Epilogue()
