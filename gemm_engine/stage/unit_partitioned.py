"""Unit-partitioned stage: every unit owns a rectangle of ``partition_m x partition_n`` tiles.

Units are laid out row-major over the stage (``units_m x units_n``). With the register tile, a unit
with partition 1 x 1 computes a ``tile_m x tile_n`` block; the stage's tile loop over k is rendered
unrolled whenever the listener injects code, so each event lands at its exact place.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..tile.base import SmemTile
from .base import StageConfig, StageMatmul, Writer
from .events import (Begin, Finish, LhsLoaded, RhsLoaded, StageEventListener,
                     TileMatmulCompleted)

# Pad every shared-memory row by 4 elements: keeps 16-byte alignment of rows for vector reads while
# moving consecutive k rows onto different banks for the loaders' transposing stores.
SMEM_PAD = 4


@dataclass(frozen=True)
class UnitStageConfig(StageConfig):
    units_m: int = 1
    units_n: int = 1


class UnitPartitionedStage(StageMatmul):
    name = "unit_partitioned_stage"

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> UnitStageConfig:
        tile_cfg = self.tile.setup(problem, selection, dialect)
        if self.tile.scope != "unit":
            raise SetupError(self.name, f"tile {self.tile.name!r} is plane-scoped; use a plane-partitioned stage")
        sm, sn, sk = selection.stage_m, selection.stage_n, selection.stage_k
        if sm % tile_cfg.tile_m or sn % tile_cfg.tile_n:
            raise SetupError(self.name, f"tile {tile_cfg.tile_m}x{tile_cfg.tile_n} does not divide "
                                        f"stage {sm}x{sn}")
        units_m, units_n = sm // tile_cfg.tile_m, sn // tile_cfg.tile_n
        units = units_m * units_n
        if units > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{units} units per cube exceed the device's "
                                        f"{dialect.device.max_threads_per_cube}")
        if sk < 1:
            raise SetupError(self.name, f"stage_k={sk} must be positive")
        return UnitStageConfig(tile=tile_cfg, stage_m=sm, stage_n=sn, stage_k=sk, units=units,
                               lhs_ld=sm + SMEM_PAD, rhs_ld=sn + SMEM_PAD,
                               units_m=units_m, units_n=units_n)

    def declare(self, cfg: UnitStageConfig, d: Dialect) -> str:
        t = self.tile
        return "\n".join([
            f"const int part_m0 = (UNIT_ID / {cfg.units_n}) * {cfg.tile.tile_m};",
            f"const int part_n0 = (UNIT_ID % {cfg.units_n}) * {cfg.tile.tile_n};",
            t.declare_acc(cfg.tile, d, "acc"),
            t.declare_lhs(cfg.tile, d, "lhs_frag"),
            t.declare_rhs(cfg.tile, d, "rhs_frag"),
        ])

    def init_accumulators(self, cfg, d):
        return self.tile.init_acc(cfg.tile, d, "acc")

    def _k_step(self, cfg, d, lhs_smem, rhs_smem, k: str) -> tuple[str, str, str]:
        t, tc = self.tile, cfg.tile
        return (t.load_lhs(tc, d, "lhs_frag", SmemTile(lhs_smem, cfg.lhs_ld, k, "part_m0")),
                t.load_rhs(tc, d, "rhs_frag", SmemTile(rhs_smem, cfg.rhs_ld, k, "part_n0")),
                t.execute(tc, d, "lhs_frag", "rhs_frag", "acc"))

    def execute(self, cfg, d, lhs_smem, rhs_smem, listener: StageEventListener) -> str:
        n = cfg.stage_k
        # Ask in execution order, so a listener sees the events as the kernel will run them.
        begin = listener.on_event(Begin())
        injected = {}
        for i in range(n):
            for ev in (LhsLoaded(i, n), RhsLoaded(i, n), TileMatmulCompleted(i, n)):
                injected[ev] = listener.on_event(ev)
        finish = listener.on_event(Finish())
        out = [begin] if begin else []
        if not any(injected.values()):
            # Nothing to interleave: a compact loop (the compiler unrolls it) keeps sources small.
            load_l, load_r, execute = self._k_step(cfg, d, lhs_smem, rhs_smem, "kk")
            out += [f"#pragma unroll\nfor (int kk = 0; kk < {n}; ++kk) {{", load_l, load_r, execute, "}"]
        else:
            for i in range(n):
                load_l, load_r, execute = self._k_step(cfg, d, lhs_smem, rhs_smem, str(i))
                for code, ev in ((load_l, LhsLoaded(i, n)), (load_r, RhsLoaded(i, n)),
                                 (execute, TileMatmulCompleted(i, n))):
                    out.append(code)
                    if injected[ev]:
                        out.append(injected[ev])
        if finish:
            out.append(finish)
        return "\n".join(out)

    def write(self, cfg, d, writer: Writer) -> str:
        lines = []
        for row, col, value in self.tile.acc_elements(cfg.tile, "acc"):
            lines.append(writer(f"part_m0 + {row}", f"part_n0 + {col}", value))
        return "\n".join(lines)
