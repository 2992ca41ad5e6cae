"""Batch level: the kernel entry point, dispatching global matmuls over the whole output.

Contract
--------
The batch level owns the kernel: its `KernelSignature` (codegen/signature.py: for each operand a base
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

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..errors import SetupError
from ..global_.base import GlobalConfig, GlobalMatmul
from ..epilogue.spec import Epilogue
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..codegen.signature import KernelSignature
from .order import (DISPATCH_FUNCTION, DISPATCHES, Dispatch, DispatchScope,  # noqa: F401  (re-exported)
                    dispatch_for, dispatch_knobs, register_dispatch)
from .split_tail import SplitTailScope

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
    #: The output's: a condition true when the tile may pass through a staging tile in shared
    #: memory but its map would store rows it must not (a grouped tile past its group's end: those
    #: rows are another group's); the units then copy the rows below ``CubeScope.m`` from the
    #: staging tile. Empty where no such tile exists.
    staging_flag: str = ""


@dataclass(frozen=True)
class CubeScope:
    """Everything a global matmul's body may read of the kernel around it, as C expressions."""

    lhs: OperandRef
    rhs: OperandRef
    out: OperandRef
    m: str = "M"            # rows of the output
    n: str = "N"            # columns of the output
    k: str = "K"            # length of this cube's K range (the whole K unless the batch splits it)
    #: The reduction's first index in the operands' tensor-map coordinates (a grouped "k" layout:
    #: the group's first; ``ptr`` is already moved there), and whether ``k`` is a name each tile's
    #: body defines anew (its group's length) rather than one fixed for the kernel.
    k_origin: str = "0"
    k_per_tile: bool = False
    m0: str = "cube_m0"     # first output row of this cube's tile
    n0: str = "cube_n0"     # first output column
    #: Batch levels providing PERSISTENT_TILE_LOOP: ``tiles(body, first="0", step=1)`` renders the
    #: loop over this cube's tiles (only the ``first``-th and every ``step``-th after it: roles
    #: that share the tiles) around ``body`` (which then reads m0, n0, the output and the batch
    #: coordinates of the tile at hand); global levels with roles call it once per role, and the
    #: one unit that issues the TMA copies through ``lhs`` / ``rhs``'s maps passes ``loads=True``
    #: (where the maps change per tile, that loop keeps them). None elsewhere.
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

    @property
    def weights(self):
        """The quantized weights some kernel of this batch reads (a `WeightFormat`: the global
        level's, or a pass of the batch level's own), or None."""
        return self.global_.weights


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
    #: Kept scratch: the leading elements the kernels expect zero and leave zero (None: all).
    zeroed: int | None = None


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
    #: The grouped layouts (problem.py `GROUP_LAYOUTS`) this level walks; none: it runs dense
    #: problems only (its grid and pointers follow sizes known on the host).
    group_layouts: ClassVar[frozenset] = frozenset()
    #: Whether the kernel signature and pointers carry quantized weights' scales and zeros
    #: (`GlobalConfig.weights`); levels that do not refuse quantized problems (`check_weights`).
    passes_weights: ClassVar[bool] = False
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

    def check_groups(self, problem: MatmulProblem) -> None:
        """SetupError unless this level runs ``problem``'s layout: a grouped problem needs a level
        that walks its groups (batch/grouped.py), a grouped level runs grouped problems only."""
        layout = problem.groups.layout if problem.groups is not None else None
        if layout is None and self.group_layouts:
            raise SetupError(self.name, "it walks the groups of a grouped problem (grouped_matmul); this "
                                        "problem is dense")
        if layout is not None and layout not in self.group_layouts:
            known = f"it walks {sorted(self.group_layouts)} only" if self.group_layouts else \
                "its grid and operand pointers follow sizes known on the host, not group extents read on the device"
            raise SetupError(self.name, f"cannot run a grouped problem of layout {layout!r}: {known}")

    def check_weights(self, problem: MatmulProblem) -> None:
        """SetupError unless this level and its global level run the problem's rhs as given: a
        quantized weight needs a level that passes its scales and zeros and a global level (or rhs
        loader) that reads it; a dense rhs one that does not."""
        if problem.weights is not None and not self.passes_weights:
            raise SetupError(self.name, f"does not pass quantized weights' scales and zeros to its kernels "
                                        f"({problem.weights.kind} rhs)")
        self.global_.check_weights(problem)

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
        hint = self.global_.occupancy or cfg.global_.occupancy
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
