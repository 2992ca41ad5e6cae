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

Dispatch contract: a `Dispatch` renders statements that, from ``cube`` (the linear tile index) and
``cubes_m`` / ``cubes_n`` (tiles along M and N), define ``b``, ``cube_row`` and ``cube_col``
(``i64``), as a bijection of ``[0, batch * cubes_m * cubes_n)`` onto (batch, row, column) for any
sizes; its own helper names start with ``dispatch_``. `register_dispatch` makes an order reachable
by the name a selection's ``dispatch`` knob gives.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..errors import SetupError
from ..global_.base import GlobalConfig, GlobalMatmul
from ..epilogue.spec import Epilogue
from ..problem import MatmulProblem
from ..compose.registry import Registry
from ..compose.selection import Knob
from ..codegen.signature import KernelSignature

KERNEL_NAME = "gemm_engine_kernel"


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
    #: The split-tail schedule (batch/split_tail.py `SplitTailScope`) where ``tiles`` renders one:
    #: the body then computes slices ``k_lo`` .. ``k_hi`` of its tile and adds partial sums. None elsewhere.
    split_tail: object = None


# -- dispatch orders ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dispatch:
    """Base of dispatch orders (frozen dataclasses: their parameters are part of the compile key)."""

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

    def render(self) -> str:
        raise NotImplementedError


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


def dispatch_for(name: str, width: int, component: str = "dispatch") -> Dispatch:
    """The order a selection names, with its width where it has one (orders without a parameter
    ignore it, so it does not split their compile key)."""
    if name not in DISPATCHES:
        raise SetupError(component, f"unknown dispatch {name!r}; known: {sorted(DISPATCHES)}")
    cls = DISPATCHES[name]
    if not cls.has_width:
        return cls()
    if width < 1:
        raise SetupError(component, f"dispatch_width={width!r}: a {name} order needs a positive width")
    return cls(width=width)


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

    def __init__(self, global_: GlobalMatmul, dispatch: type[Dispatch] | None = None):
        self.global_ = global_
        self.dispatch = dispatch

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig: ...

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
