"""Ordered global matmul: each unit loads its own lhs rows from global memory into registers.

Rhs goes through shared memory exactly as in double buffering (two stages, the next slice's loads
spread between the tile executions, one barrier per K step). Lhs has no shared-memory stage: at the
start of every K step each unit reads the ``tile_m x stage_k`` block of lhs it multiplies straight
into its register array (`OrderedPartitionedStage`), in a fixed order (the contiguous axis
innermost), zero-filling outside the problem. No barrier protects those registers: no other unit
reads them.

The trade-off: units with the same rows (the same ``part_m0``, i.e. a whole row of the stage's
``units_m x units_n`` grid) load the same lhs values redundantly, ``units_n`` times per cube instead
of once into shared memory; in exchange the cube needs no lhs shared memory and no lhs fragment
reads from it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..compose.contracts import Requirement
from ..problem import Layout
from ..compose.capabilities import REGISTER_LHS_STAGE
from ..stage.ordered_partitioned import LHS_REGS
from .base import TASK_LOADER, UNIT_REGISTERS, UNIT_ROWS_LOADER, GlobalConfig
from .double_buffering import DoubleBufferingGlobalMatmul
from .listeners import OrderedListener
from .read.loaders import Loader, LoaderConfig, OperandTile


class UnitRowsLoader(Loader):
    """Loads one unit's own lhs rows into its register array (no sharing between units).

    Its operand is the unit's ``rows x stage_k`` block, stored like a k-major tile of leading
    dimension ``rows`` (``regs[k * rows + r]``); ``tasks`` gives one block of unrolled loops, so every
    register index is a compile-time constant."""

    name = "unit_rows"
    provides = frozenset({UNIT_ROWS_LOADER, UNIT_REGISTERS})

    def setup(self, operand: OperandTile, units: int, selection=None) -> LoaderConfig:
        return LoaderConfig(operand=operand, units=1, tasks=1)   # every unit loads alone

    def tasks(self, cfg, d, src, regs, row0, col0, rows_bound, cols_bound, unit="UNIT_ID"):
        op = cfg.operand
        loops = [("r", op.rows), ("c", op.cols)]
        if op.layout is Layout.COL:
            loops.reverse()   # walk the contiguous axis innermost: consecutive addresses
        head = "\n".join(f"#pragma unroll\nfor (int {v} = 0; {v} < {n}; ++{v})" for v, n in loops)
        body = (f"const i64 gr = {row0} + r;\nconst i64 gc = {col0} + c;\n"
                f"{regs}[{op.smem_index('r', 'c')}] = {op.read(d, src, 'gr', 'gc', rows_bound, cols_bound)};")
        return [f"{head} {{\n{body}\n}}"]


@dataclass(frozen=True)
class OrderedGlobalConfig(GlobalConfig):
    @property
    def shared_memory_bytes(self) -> int:
        return self.rhs_loader.smem_bytes   # lhs lives in registers


class OrderedGlobalMatmul(DoubleBufferingGlobalMatmul):
    """Needs a stage that reads lhs from unit registers (`OrderedPartitionedStage`) and a
    `UnitRowsLoader` for lhs (see `OrderedAlgorithm`): declared in ``requires``."""

    name = "ordered_global"
    requires = (Requirement.of("stage", REGISTER_LHS_STAGE, why="it fills each unit's lhs registers"),
                Requirement.of("lhs_loader", UNIT_ROWS_LOADER),
                Requirement.of("rhs_loader", TASK_LOADER))
    listener_class = OrderedListener
    config_class = OrderedGlobalConfig

    def operand_tiles(self, problem, stage_cfg):
        lhs, rhs = super().operand_tiles(problem, stage_cfg)
        # The lhs a unit loads: its own rows (bounds checks as for the whole stage's rows).
        _, rows = self.stage.unit_rows(stage_cfg)
        return replace(lhs, rows=rows, smem_ld=rows), rhs

    def shared_declarations(self, cfg, d):
        return self.shared_array(cfg.rhs_loader, d, "rhs_smem", cfg.stage.rhs_smem_elems)

    def load_tasks(self, cfg, d, scope, lhs_smem, rhs_smem, k0, unit="UNIT_ID"):
        """Only rhs goes through shared memory (``lhs_smem`` is unused)."""
        return self.rhs_loader.tasks(cfg.rhs_loader, d, scope.rhs, rhs_smem, k0, scope.n0, scope.k, scope.n, unit)

    def _buffer(self, cfg, which):
        # The stage's lhs operand is the register array whichever the rhs buffer.
        return LHS_REGS, super()._buffer(cfg, which)[1]

    def own_listener(self, cfg, d, scope, next_tasks):
        row0, _ = self.stage.unit_rows(cfg.stage)
        (lhs_loads,) = self.lhs_loader.tasks(cfg.lhs_loader, d, scope.lhs, LHS_REGS, f"{scope.m0} + {row0}",
                                             "k0", scope.m, scope.k)
        return self.listener_class(next_tasks, begin=lhs_loads)
