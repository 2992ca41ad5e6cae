"""The dispatch contract: which output tile of which batch entry a linear cube index computes.

A `Dispatch` renders statements that, from the scope's ``cube`` (the linear tile index) and
``cubes_m`` / ``cubes_n`` (tiles along M and N), define the scope's ``b``, row and column (``i64``),
as a bijection of ``[0, batch * cubes_m * cubes_n)`` onto (batch, row, column) for any sizes; its
own helper names start with the scope's prefix (``dispatch_``). `register_dispatch` makes an order
reachable by the name a selection's ``dispatch`` knob gives. The built-in orders are in
batch/dispatch.py; batch/base.py re-exports these names.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import ClassVar

from ..compose.contracts import check_defines, component_name
from ..compose.registry import Registry
from ..compose.selection import Knob
from ..errors import SetupError
#: The function a batch level that maps tiles in several places of its kernel renders its
#: dispatch order into once (`Dispatch.function`).
DISPATCH_FUNCTION = "gemm_engine_dispatch"

# -- dispatch orders ----------------------------------------------------------------------------------
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
#: The contract in words, for the refusals.
_DISPATCH_CONTRACT = ("a dispatch order defines the scope's b, row and col (i64) from its cube, cubes_m, "
                      "cubes_n and batch (batch/base.py, DispatchScope)")


@dataclass(frozen=True)
class DispatchScope:
    """What a batch level hands its dispatch order: the inputs it reads (C expressions: names, numbers
    or parenthesized) and the names of the ``i64`` variables it must define: ``b`` (the tile's
    batch entry), ``row`` and ``col`` (its tile row and column); every other name the order
    declares starts with ``prefix``. The defaults are the partitioned kernels' names."""

    cube: str = "cube"            # the linear tile index, in [0, batch * cubes_m * cubes_n)
    cubes_m: str = "cubes_m"      # tiles along M
    cubes_n: str = "cubes_n"      # tiles along N
    batch: str = "batch"          # batch entries
    b: str = "b"
    row: str = "cube_row"
    col: str = "cube_col"
    prefix: str = "dispatch_"

    def __post_init__(self):
        for name in self.outputs:
            if not _IDENTIFIER.fullmatch(name):
                raise ValueError(f"DispatchScope: output {name!r} is not a C name")
        for expr in self.inputs:
            if not (_IDENTIFIER.fullmatch(expr) or expr.isdigit() or (expr.startswith("(") and expr.endswith(")"))):
                raise ValueError(f"DispatchScope: input {expr!r} must be a name, a number or parenthesized")

    @property
    def inputs(self) -> tuple[str, str, str, str]:
        return self.cube, self.cubes_m, self.cubes_n, self.batch

    @property
    def outputs(self) -> tuple[str, str, str]:
        return self.b, self.row, self.col

    def call(self, function: str = DISPATCH_FUNCTION) -> list[str]:
        """Statements defining the outputs by a call of the order's `Dispatch.function`."""
        b, row, col = self.outputs
        return [f"i64 {b}, {row}, {col};",
                f"{function}({', '.join(self.inputs)}, &{b}, &{row}, &{col});"]


#: The names of the old contract, which an order's ``render(self)`` reads and defines.
_FIXED = DispatchScope()


@dataclass(frozen=True)
class Dispatch:
    """Base of dispatch orders (frozen dataclasses: their parameters are part of the compile key).
    Subclasses implement ``render(self, scope)``; batch levels call `define`, which checks it."""

    name: ClassVar[str] = "dispatch"
    #: Whether the order takes the ``dispatch_width`` knob (a strip or group width).
    has_width: ClassVar[bool] = False
    #: The selection fields the batch level reads for its order: ``dispatch`` (defaulting to this
    #: order's name: the order in an algorithm's dispatch slot is its default) and ``dispatch_width``.
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset()
    requires: ClassVar[tuple] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "knobs" not in cls.__dict__:
            cls.knobs = dispatch_knobs(cls.name)

    def render(self, scope: DispatchScope) -> str:
        """Statements defining ``scope.b``, ``scope.row``, ``scope.col`` from the scope's inputs."""
        raise NotImplementedError

    @classmethod
    def takes_scope(cls) -> bool:
        """Whether ``render`` takes a `DispatchScope` (the old form, ``render(self)``, renders the
        fixed names)."""
        return len(inspect.signature(cls.render).parameters) > 1

    def define(self, scope: DispatchScope = _FIXED, consumer: str = "batch") -> str:
        """The order's code for ``scope``; SetupError naming this order and ``consumer`` (the batch
        level) unless it defines the scope's outputs (and, in the scope form, declares no other
        name without the scope's prefix)."""
        provider = f"dispatch {component_name(type(self))}"
        if type(self).render is Dispatch.render:
            raise SetupError(consumer, f"{provider} has no render(self, scope)")
        code = self.render(scope) if self.takes_scope() else self.render()
        if not isinstance(code, str):
            raise SetupError(consumer, f"{provider}'s render returned {type(code).__name__}, not C source")
        if self.takes_scope():
            check_defines(code, scope.outputs, provider, consumer, _DISPATCH_CONTRACT, helper_prefix=scope.prefix)
            return code
        check_defines(code, _FIXED.outputs, provider, consumer, _DISPATCH_CONTRACT + "; render(self) defines "
                      "b, cube_row and cube_col from cube, cubes_m, cubes_n and batch")
        fixed = (scope.inputs, scope.outputs) == (_FIXED.inputs, _FIXED.outputs)
        return code if fixed else _rebound(code, scope)

    def function(self, consumer: str = "batch", name: str = DISPATCH_FUNCTION) -> str:
        """The order as an inline function ``name(cube, cubes_m, cubes_n, batch, &b, &row, &col)``
        (`DispatchScope.call`), for a batch level that maps tiles in several places of one kernel
        (each warp role's tile loop), so that the order is rendered once."""
        s = _FIXED
        return "\n".join([
            f"/* dispatch {self.name}: (cube, cubes_m, cubes_n, batch) -> (b, cube_row, cube_col) */",
            f"INLINE void {name}(const i64 cube, const i64 cubes_m, const i64 cubes_n, const i64 batch,",
            "    i64* tile_b, i64* tile_row, i64* tile_col)",
            "{",
            self.define(s, consumer),
            f"*tile_b = {s.b}; *tile_row = {s.row}; *tile_col = {s.col};",
            "}"])


def _rebound(code: str, scope: DispatchScope) -> str:
    """Old-form ``code`` (the fixed names) in a block of its own that reads ``scope``'s inputs, and
    ``scope``'s outputs defined from it."""
    p = scope.prefix
    inputs = [(fixed, expr) for fixed, expr in zip(_FIXED.inputs, scope.inputs) if fixed != expr]
    return "\n".join([
        *(f"const i64 {p}in_{fixed} = {expr};" for fixed, expr in inputs),
        f"i64 {p}out_b, {p}out_row, {p}out_col;",
        "{",
        *(f"const i64 {fixed} = {p}in_{fixed};" for fixed, _ in inputs),
        code,
        f"{p}out_b = {_FIXED.b}; {p}out_row = {_FIXED.row}; {p}out_col = {_FIXED.col};",
        "}",
        f"const i64 {scope.b} = {p}out_b;",
        f"const i64 {scope.row} = {p}out_row;",
        f"const i64 {scope.col} = {p}out_col;"])


DISPATCHES: Registry = Registry("dispatch order")


def register_dispatch(cls: type[Dispatch] | None = None, replace: bool = False):
    """Class decorator (also as ``@register_dispatch(replace=True)``): make a dispatch order
    reachable by its ``name`` (a selection's ``dispatch``). A taken name is refused unless ``replace``."""
    def apply(cls):
        if not (isinstance(cls, type) and issubclass(cls, Dispatch)):
            raise TypeError(f"register_dispatch: expected a Dispatch subclass, got {cls!r}")
        return DISPATCHES.register(cls.name, cls, replace, "give the order another name")
    return apply if cls is None else apply(cls)


def dispatch_knobs(default: str) -> tuple[Knob, ...]:
    """The knobs every batch level reads for its order: the order's name, its width."""
    return (Knob("dispatch", default, "order of output tiles (a registered dispatch name)"),
            Knob("dispatch_width", 4, "strip or group width, in tiles, of the orders that have one"))


def dispatch_for(name: str, width: int, component: str = "dispatch", scope: DispatchScope = _FIXED) -> Dispatch:
    """The order a selection names, with its width where it has one (orders without a parameter
    ignore it, so it does not split their compile key); SetupError naming it and ``component``
    (the batch level) unless it keeps the contract for ``scope`` (`Dispatch.define`)."""
    if name not in DISPATCHES:
        raise SetupError(component, f"unknown dispatch {name!r}; known: {sorted(DISPATCHES)}")
    cls = DISPATCHES[name]
    if not cls.has_width:
        dispatch = cls()
    elif width < 1:
        raise SetupError(component, f"dispatch_width={width!r}: a {name} order needs a positive width")
    else:
        dispatch = cls(width=width)
    dispatch.define(scope, component)
    return dispatch


