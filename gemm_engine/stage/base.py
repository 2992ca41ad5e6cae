"""Stage level: one cube (block / work-group) multiplies the operands held in shared memory.

Contract
--------
On entry to ``execute`` the lhs stage (``stage_m x stage_k``) and rhs stage (``stage_k x stage_n``)
are in shared memory, stored k-major by default (element ``(k, x)`` at ``array[k * ld + x]``, ``ld``
from the config, so the global level's loaders know where to put data) or, where the config's
``lhs_k_contiguous`` / ``rhs_k_contiguous`` says so (a stage sets them only when its selection asks
for it and its tile reads that orientation), k-contiguous (``array[x * ld + k]``), and every unit of the cube has
passed a barrier since they were written. The stage decides which unit or plane runs which tile
matmuls (its *partition*), has the tile level read fragments and execute, and adds the result into
accumulators it declared with ``declare``/``init``. It moves no global memory and issues no barrier
itself; between tile executions it asks its `StageEventListener` for code (``Begin``,
``LhsLoaded``, ``RhsLoaded``, ``TileMatmulCompleted(i, n)``, ``Finish``) so the global level can
interleave its own work. On exit the shared stages may be overwritten once all units pass a barrier.

``write`` hands every accumulator element, with its row and column inside the stage, to a writer
callback (the global level's, which owns bounds and the epilogue).

Declared (`gemm_engine.compose.contracts`): a stage requires a tile of its scope, requires of
the loaders that they write shared memory the way it reads it, and provides one of the stage
capabilities (`SMEM_STAGE`, `REGISTER_LHS_STAGE`, `CARRIED_FRAGMENTS`, `ASYNC_DESCRIPTOR_STAGE`:
compose/capabilities.py), which the global levels require. Which orientation each operand has in shared memory is the
loaders' choice, passed to ``setup`` by the global level (``lhs_k_contiguous``, ``rhs_k_contiguous``);
a stage that cannot read it refuses. The selection fields it reads are its ``knobs``.

A stage that provides `CARRIED_FRAGMENTS` also answers ``carry_refusal(cfg)`` (why this config
cannot, or None), ``load_first(cfg, d, lhs, rhs)`` (the first slot's first fragments, before the
loop) and takes ``execute(..., carry=Carry(...))``: then the one barrier it runs is the global
level's ``handover`` code, placed where it says (before its last k tile), and it reads the next
slot (``lhs_next`` / ``rhs_next``) only after it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

from ..codegen.dialect import Dialect
from ..codegen.emitter import roll
from ..compose.capabilities import (ASYNC_DESCRIPTOR_STAGE, CARRIED_FRAGMENTS,  # noqa: F401 (re-exported)
                                    REGISTER_LHS_STAGE, SMEM_STAGE)
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..tile.base import TileConfig, TileMatmul
from .events import StageEventListener


@dataclass(frozen=True)
class Carry:
    """What a global level hands a stage that carries fragments across ring slots: ``handover``,
    code that makes the next slot readable (its wait and barrier); ``lhs_next`` / ``rhs_next``, the
    next slot's shared-memory expressions; ``more``, the condition that there is a next slot."""

    handover: str
    lhs_next: str
    rhs_next: str
    more: str


#: writer(row_expr, col_expr, value_expr) -> C statement storing one accumulator element.
Writer = Callable[[str, str, str], str]


class StoreWriter:
    """A `Writer` that says whether its stores may be rolled into loops (``loops``): not where each
    carries the fused epilogue's terms (H200, relu(a@b+bias) 8192x8192x64 bf16: 66.2 us rolled
    against 60.5 unrolled, nvcc's address arithmetic differs; plain stores: the same time)."""

    __slots__ = ("store", "loops")

    def __init__(self, store: Writer, loops: bool = True):
        self.store, self.loops = store, loops

    def __call__(self, row: str, col: str, value: str) -> str:
        return self.store(row, col, value)


def stores(writer: Writer, statements: list[str]) -> str:
    """A writer's statements (one per accumulator element), as loops where they differ only in affine
    indices (codegen/emitter.py `roll`) and the writer allows it, else as they are."""
    if isinstance(writer, StoreWriter) and not writer.loops:
        return "\n".join(statements)
    return roll(statements)


@dataclass(frozen=True)
class StageConfig:
    tile: TileConfig
    stage_m: int
    stage_n: int
    stage_k: int
    units: int          # threads / work-items per cube
    lhs_ld: int         # shared-memory leading dimension of the lhs stage (>= stage_m k-major,
                        # >= stage_k k-contiguous)
    rhs_ld: int         # ... of the rhs stage (>= stage_n, or >= stage_k)
    lhs_k_contiguous: bool = False   # lhs stored [m][k] instead of the default k-major [k][m]
    rhs_k_contiguous: bool = False   # rhs stored [n][k] instead of [k][n]

    @property
    def lhs_smem_elems(self) -> int:
        return (self.stage_m if self.lhs_k_contiguous else self.stage_k) * self.lhs_ld

    @property
    def rhs_smem_elems(self) -> int:
        return (self.stage_n if self.rhs_k_contiguous else self.stage_k) * self.rhs_ld


class StageMatmul(ABC):
    """A stage matmul family, generic over its tile matmul."""

    name = "stage"
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset({SMEM_STAGE})
    requires: ClassVar[tuple] = ()
    uses: ClassVar[tuple[str, ...]] = ("tile",)

    def __init__(self, tile: TileMatmul):
        self.tile = tile

    def config_requirements(self, cfg: StageConfig) -> tuple:
        """`Requirement`s of the loaders that this config adds to the class's ``requires`` (a
        selection field that changes what the stage reads: swizzled rows); the global level checks
        them at setup (`GlobalMatmul.setup_stage`). None by default."""
        return ()

    def requires_k_major(self, problem: MatmulProblem) -> bool:
        """Whether the operands must reach this stage K-major (its tile's business: tf32 wgmma)."""
        return self.tile is not None and self.tile.requires_k_major(problem)

    def region(self, cfg: StageConfig) -> str:
        """The comment that opens this stage's code: the stage and its tile with their configs."""
        from ..codegen.comments import plain_fields, region
        return region("stage", self, cfg, f"| tile {type(self.tile).__name__}: {plain_fields(cfg.tile)}")

    # -- setup checks the partitioned stages share ----------------------------------------------
    def _check_positive(self, **values: int) -> None:
        """SetupError naming the first selection field (in the order given) that is below 1."""
        for label, value in values.items():
            if value < 1:
                raise SetupError(self.name, f"{label}={value} must be positive")

    def _groups_units(self, groups: int, noun: str, group_units: int, dialect: Dialect) -> int:
        """Units of ``groups`` groups (planes, warpgroups) of ``group_units``; SetupError when the
        device does not allow that many units per cube."""
        units = groups * group_units
        if units > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{groups} {noun} ({units} units) exceed the device's "
                                        f"{dialect.device.max_threads_per_cube} units per cube")
        return units

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool = False,
              rhs_k_contiguous: bool = False) -> StageConfig:
        """The stage's config; ``*_k_contiguous``: the orientation the loaders store each operand in
        (rows of shared memory along k: a row-major lhs or a column-major rhs copied as it lies)."""

    @abstractmethod
    def declare(self, cfg: StageConfig, d: Dialect) -> str:
        """Declare (in registers) the accumulators and fragments this unit needs, and its partition."""

    @abstractmethod
    def init_accumulators(self, cfg: StageConfig, d: Dialect) -> str: ...

    @abstractmethod
    def execute(self, cfg: StageConfig, d: Dialect, lhs_smem: str, rhs_smem: str,
                listener: StageEventListener) -> str: ...

    @abstractmethod
    def write(self, cfg: StageConfig, d: Dialect, writer: Writer) -> str: ...

    def write_columns(self, cfg: StageConfig, d: Dialect, writer: Writer, columns: range) -> str:
        """`write` of the elements in the stage tile's ``columns`` only (a range of multiples of 8),
        for a writer that stages the tile in parts; SetupError where the stage cannot tell its
        elements' columns apart when the kernel is rendered."""
        raise SetupError(self.name, "writes its tile only whole (a writer asked for column parts)")
