"""Batch level: the kernel entry point, dispatching global matmuls over the whole output.

Contract
--------
The batch level owns the kernel: its `KernelSignature` (batch/signature.py: for each operand a base
pointer, an element offset, a leading dimension and a batch stride (0 for a broadcast batch), the
output likewise, ``M``, ``N``, ``K``, ``batch``, then what the epilogue and the batch level itself
append, such as a workspace), the grid, and the map from each cube (block / work-group) to one
``(batch index, output tile row, output tile column)`` through its *dispatch* order (a component
slot of its own, `Dispatch` below). For each tile it hands the global level a `CubeScope`: the
expressions that reach the operands at this batch entry (`OperandRef`: pointer and leading
dimension), the extents, the cube's K range and its origin. The global level reads nothing else of
the kernel: a batch level that splits K or reads a transposed copy says so through the scope.

Every output tile of every batch entry is given to exactly one cube: one cube per tile, or
(persistent) about one cube per compute unit, each looping over the tiles ``CUBE_ID``,
``CUBE_ID + CUBE_COUNT``, ... of the dispatch order, which needs a global matmul whose body may run
several times in one cube (``GlobalMatmul.reentrant``).

Dispatch contract (`DispatchScope`, the data the batch level hands ``Dispatch.render``): from the
scope's inputs ``cube`` (the linear tile index), ``cubes_m`` / ``cubes_n`` (tiles along M and N)
and ``batch``, an order renders statements that define the scope's outputs ``b``, ``row`` and
``col`` (``i64`` variables: batch entry, tile row, tile column), as a bijection of ``[0, batch *
cubes_m * cubes_n)`` onto (batch, row, column) for any sizes; every other name it declares starts
with the scope's ``prefix``. `Dispatch.define` renders and checks that (a `SetupError` naming the
order and the batch level), at setup already (`dispatch_for`). An order written for the old
contract, ``render(self)`` defining ``b``, ``cube_row``, ``cube_col`` from ``cube``, ``cubes_m``,
``cubes_n``, ``batch``, still works: its outputs are checked, and where a scope names other
variables its code runs in a block of its own. `register_dispatch` makes an order reachable by the
name a selection's ``dispatch`` knob gives.
"""
from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from ..codegen.dialect import Dialect
from ..compose.contracts import check_defines, component_name
from ..dtypes import ElementType
from ..errors import SetupError
from ..global_.base import GlobalConfig, GlobalMatmul
from ..epilogue.spec import Epilogue
from ..problem import MatmulProblem
from ..compose.registry import Registry
from ..compose.selection import Knob
from ..codegen.signature import KernelSignature
from .split_tail import SplitTailScope

KERNEL_NAME = "gemm_engine_kernel"
#: The function a batch level that maps tiles in several places of its kernel renders its
#: dispatch order into once (`Dispatch.function`).
DISPATCH_FUNCTION = "gemm_engine_dispatch"


# -- the scope a batch level hands its global level --------------------------------------------------
@dataclass(frozen=True)
class OperandRef:
    """How a cube reaches one operand (or the output): ``ptr`` points at element (0, 0) of this batch
    entry (and of the cube's K range, for lhs and rhs), ``ld`` is its leading dimension."""

    ptr: str
    ld: str
    #: The operand's TMA tensor-map parameter and its batch coordinate (batch levels providing
    #: TENSOR_MAPS; empty otherwise).
    tensor_map: str = ""
    batch: str = "0"
    #: A condition true when this call may use ``tensor_map`` (the output's: its alignment is
    #: known per call only); empty where the map is always usable.
    map_flag: str = ""


@dataclass(frozen=True)
class CubeScope:
    """Everything a global matmul's body may read of the kernel around it, as C expressions."""

    lhs: OperandRef
    rhs: OperandRef
    out: OperandRef
    m: str = "M"            # rows of the output
    n: str = "N"            # columns of the output
    k: str = "K"            # length of this cube's K range (the whole K unless the batch splits it)
    m0: str = "cube_m0"     # first output row of this cube's tile
    n0: str = "cube_n0"     # first output column
    #: Batch levels providing PERSISTENT_TILE_LOOP: ``tiles(body, first="0", step=1)`` renders the
    #: loop over this cube's tiles (only the ``first``-th and every ``step``-th after it: roles
    #: that share the tiles) around ``body`` (which then reads m0, n0, the output and the batch
    #: coordinates of the tile at hand); global levels with roles call it once per role. None elsewhere.
    tiles: Callable[[str], str] | None = field(default=None, compare=False)
    #: Cubes launched together in a cluster along M (consecutive cube ids on tiles one above the
    #: other of the same column, as many tiles each), and this cube's rank in it (an expression).
    cluster_m: int = 1
    cluster_rank: str = "0"
    #: The split-tail schedule (batch/split_tail.py) where ``tiles`` renders one: the body then
    #: computes the slices its ``k_range`` names of its tile and adds partial sums. None elsewhere.
    split_tail: SplitTailScope | None = None

    def operand(self, op: str) -> OperandRef:
        """The reference of ``op``: "lhs", "rhs" or "out"."""
        if op not in ("lhs", "rhs", "out"):
            raise ValueError(f"operand: expected 'lhs', 'rhs' or 'out', got {op!r}")
        return getattr(self, op)


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


# -- configs and the level's interface --------------------------------------------------------------
@dataclass(frozen=True)
class BatchConfig:
    global_: GlobalConfig
    dispatch: Dispatch
    #: Persistent launch: at most this many cubes, each looping over tiles; 0: one cube per tile.
    #: Host-side only (the kernel reads its cube count), but it depends on the device.
    persistent_cubes: int = 0

    @property
    def units(self) -> int:
        return self.global_.units

    @property
    def result(self) -> ElementType:
        """The element type the kernels finally store (a split-K batch's global stores partials)."""
        return self.global_.out

    @property
    def epilogue(self) -> Epilogue:
        """The epilogue applied where ``result`` is stored."""
        return self.global_.epilogue


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a batch matmul (every kernel takes the batch level's signature)."""

    name: str
    cubes: int
    units: int
    dynamic_shared: bool = True   # launched with the global matmul's dynamic shared memory
    #: Its cubes wait for one another (the split tail's owners for the later parts): the runtime
    #: launches them all at once (a cooperative launch) or fails, rather than hang where fewer
    #: cubes than the grid can be resident.
    co_resident: bool = False


#: The kernel parameter a batch level's `kept_workspace` is passed as.
KEPT_SCRATCH = "kept_scratch"


@dataclass(frozen=True)
class Workspace:
    """Scratch memory the kernels of one call share: ``count`` elements of ``element``. A batch
    level's `kept_workspace` is the kernel parameter named `KEPT_SCRATCH`, its per-call
    ``workspace`` the one named ``workspace``."""

    element: ElementType
    count: int


class BatchMatmul(ABC):
    name = "batch"
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset()
    requires: ClassVar[tuple] = ()
    #: The slots this level composes.
    uses: ClassVar[tuple[str, ...]] = ("global_", "dispatch")
    #: Whether the global level sees each cube's whole K and the call's epilogue, so that one
    #: applying block scales (`GlobalMatmul.applies_block_scales`) indexes them right; a level
    #: splitting K says False, and algorithms with it refuse block-scaled problems.
    forwards_block_scales: ClassVar[bool] = True
    #: Whether the global level applies the call's epilogue, so that a gated one's column pairs are
    #: stored together (global_/write/pairs.py); a level that applies it per element says False.
    forwards_pairs: ClassVar[bool] = True

    def __init__(self, global_: GlobalMatmul, dispatch: type[Dispatch] | None = None):
        self.global_ = global_
        self.dispatch = dispatch

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig: ...

    def check_block_scales(self, problem: MatmulProblem) -> None:
        """SetupError when the problem's scales change per block of 128 along K and this level or its
        global level cannot apply them (the engine then dequantizes the operands first)."""
        if not problem.epilogue.block_scales:
            return
        if not self.global_.applies_block_scales:
            raise SetupError(self.global_.name, "the operands' scales per block of 128 along K must be applied "
                                                "between K blocks, which this global level does not do "
                                                "(matmul dequantizes the operands first instead)")
        if not self.forwards_block_scales:
            raise SetupError(self.name, "it splits K, so its global level cannot apply the operands' scales per "
                                        "block of 128 along K (matmul dequantizes the operands first instead)")

    @abstractmethod
    def cube_count(self, cfg: BatchConfig, problem: MatmulProblem) -> int: ...

    @abstractmethod
    def signature(self, cfg: BatchConfig) -> KernelSignature:
        """The parameters every kernel of this batch matmul takes, in order."""

    @abstractmethod
    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        """Every kernel function (without the dialect preamble)."""

    def kernel_attributes(self, cfg: BatchConfig, d: Dialect) -> str:
        """Attributes of the main kernel beyond its launch bounds (a cluster shape), or ""."""
        return ""

    def launch_bounds(self, cfg: BatchConfig) -> str:
        """The main kernel's launch bounds: its units, and the global matmul's occupancy hint."""
        hint = self.global_.occupancy
        return f"LAUNCH_BOUNDS_MIN({cfg.units}, {hint})" if hint else f"LAUNCH_BOUNDS({cfg.units})"

    def launches(self, cfg: BatchConfig, problem: MatmulProblem) -> list[Launch]:
        """The kernels to run, in order (one, by default)."""
        return [Launch(KERNEL_NAME, self.cube_count(cfg, problem), cfg.units)]

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> Workspace | None:
        """The scratch buffer the kernels share, or None."""
        return None

    def kept_workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> Workspace | None:
        """Scratch memory that the runtime zero-fills once and keeps between calls (per stream),
        which every kernel must leave zero (the split tail's flags), or None."""
        return None

    def call_values(self, cfg: BatchConfig, problem: MatmulProblem):
        """Parameters derived from each call's other values (a TMA tensor map holds the operand's
        address): a `CallValues`, or None when the signature has none."""
        return None


@dataclass(frozen=True)
class CallValues:
    """Kernel parameters computed per call: ``names`` and ``derive(values) -> {name: value}``, where
    ``values`` maps every other parameter name to this call's value (`launcher.operand_values`...)."""

    names: tuple[str, ...]
    derive: Callable[[dict], dict] = field(compare=False)
