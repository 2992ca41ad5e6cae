"""Unit-partitioned stage: every unit owns a rectangle of ``partition_m x partition_n`` tiles.

Units are laid out row-major over the stage (``units_m x units_n``). With the register tile, a unit
with partition 1 x 1 computes a ``tile_m x tile_n`` block; the stage's tile loop over k is rendered
unrolled whenever the listener injects code, so each event lands at its exact place.

Where a unit's tiles lie is the partition *layout*. "contiguous" (the default): side by side, one
``partition_m * tile_m x partition_n * tile_n`` block per unit. "strided": tile ``p`` of unit ``u``
along an axis sits at ``(p * units + u) * tile``, i.e. a unit's tiles are a whole grid of units
apart. Why strided: with 4-wide register tiles, consecutive units then read consecutive 16-byte
fragments of a shared-memory row (a quarter-warp's 16-byte reads cover 128 contiguous bytes: no
bank conflict), where an 8-wide contiguous block puts them 32 bytes apart (2-way conflicts).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..compose.capabilities import K_MAJOR_SMEM, UNIT_SCOPE
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..tile.base import SmemTile
from .base import StageConfig, StageMatmul, Writer, stores
from .events import (Begin, Finish, LhsLoaded, RhsLoaded, StageEventListener,
                     TileMatmulCompleted)

# Pad every shared-memory row by 4 elements: keeps 16-byte alignment of rows for vector reads while
# moving consecutive k rows onto different banks for the loaders' transposing stores.
SMEM_PAD = 4


#: Partition layouts (see the module docstring).
LAYOUTS = ("contiguous", "strided")


@dataclass(frozen=True)
class UnitFragments:
    """The register names a unit stage declares for its ``partition_m x partition_n`` tiles, which
    a subclass reading or replacing its fragments uses (`UnitStageConfig.fragments`): a 1 x 1
    partition's are ``acc``, ``lhs_frag``, ``rhs_frag``; others are numbered."""

    partition_m: int = 1
    partition_n: int = 1

    def acc(self, i: int, j: int) -> str:
        return "acc" if self.partition_m * self.partition_n == 1 else f"acc_{i}_{j}"

    def lhs(self, i: int) -> str:
        return "lhs_frag" if self.partition_m == 1 else f"lhs_frag{i}"

    def rhs(self, j: int) -> str:
        return "rhs_frag" if self.partition_n == 1 else f"rhs_frag{j}"


@dataclass(frozen=True)
class UnitStageConfig(StageConfig):
    units_m: int = 1
    units_n: int = 1
    partition_m: int = 1     # tiles per unit along m
    partition_n: int = 1
    strided: bool = False    # the "strided" partition layout

    @property
    def fragments(self) -> UnitFragments:
        """The names of this unit's accumulators and fragments."""
        return UnitFragments(self.partition_m, self.partition_n)


class UnitPartitionedStage(StageMatmul):
    name = "unit_partitioned_stage"
    knobs = (Knob("stage_m", 64, "output rows per cube"),
             Knob("stage_n", 64, "output columns per cube"),
             Knob("stage_k", 16, "k per shared-memory stage"),
             Knob("partition_m", 1, "tiles per unit along m"),
             Knob("partition_n", 1, "tiles per unit along n"),
             Knob("partition", "contiguous", "where a unit's tiles lie: side by side, or a grid of units apart",
                  choices=LAYOUTS))
    requires = (Requirement.of("tile", UNIT_SCOPE),
                Requirement.of("lhs_loader", K_MAJOR_SMEM, why="it reads k-major stages"),
                Requirement.of("rhs_loader", K_MAJOR_SMEM, why="it reads k-major stages"))

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool = False,
              rhs_k_contiguous: bool = False) -> UnitStageConfig:
        if self.tile.scope != "unit":
            raise SetupError(self.name, f"tile {self.tile.name!r} is {self.tile.scope}-scoped; "
                                        f"a unit-partitioned stage runs unit tiles")
        if lhs_k_contiguous or rhs_k_contiguous:
            raise SetupError(self.name, "reads k-major stages only; the loaders store an operand k-contiguous")
        tile_cfg = self.tile.setup(problem, selection, dialect)
        sm, sn, sk = selection.stage_m, selection.stage_n, selection.stage_k
        pm, pn, layout = selection.partition_m, selection.partition_n, selection.partition
        if pm < 1 or pn < 1:
            raise SetupError(self.name, f"partition {pm}x{pn} must be positive")
        block_m, block_n = tile_cfg.tile_m * pm, tile_cfg.tile_n * pn
        if sm % block_m or sn % block_n:
            raise SetupError(self.name, f"partition {pm}x{pn} of tile {tile_cfg.tile_m}x{tile_cfg.tile_n} "
                                        f"does not divide stage {sm}x{sn}")
        units_m, units_n = sm // block_m, sn // block_n
        units = units_m * units_n
        if units > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{units} units per cube exceed the device's "
                                        f"{dialect.device.max_threads_per_cube}")
        if sk < 1:
            raise SetupError(self.name, f"stage_k={sk} must be positive")
        return UnitStageConfig(tile=tile_cfg, stage_m=sm, stage_n=sn, stage_k=sk, units=units,
                               lhs_ld=sm + SMEM_PAD, rhs_ld=sn + SMEM_PAD,
                               units_m=units_m, units_n=units_n, partition_m=pm, partition_n=pn,
                               strided=layout == "strided")

    # -- the partition: origins of this unit's tiles (their names: `UnitStageConfig.fragments`) ----
    @staticmethod
    def _origin(cfg, axis: str, p: int) -> str:
        """Expression: first row (axis "m") or column ("n") inside the stage of this unit's tile p."""
        tile = cfg.tile.tile_m if axis == "m" else cfg.tile.tile_n
        units = cfg.units_m if axis == "m" else cfg.units_n
        step = units * tile if cfg.strided else tile
        return f"part_{axis}0" if p == 0 else f"part_{axis}0 + {p * step}"

    def declare(self, cfg: UnitStageConfig, d: Dialect) -> str:
        t, tc = self.tile, cfg.tile
        # part_m0 / part_n0: the first row / column of the unit's first tile.
        block_m = tc.tile_m * (1 if cfg.strided else cfg.partition_m)
        block_n = tc.tile_n * (1 if cfg.strided else cfg.partition_n)
        lines = [self.region(cfg), t.declare_lanes(tc, d),
                 f"const int part_m0 = (UNIT_ID / {cfg.units_n}) * {block_m};",
                 f"const int part_n0 = (UNIT_ID % {cfg.units_n}) * {block_n};"]
        f = cfg.fragments
        lines += [t.declare_acc(tc, d, f.acc(i, j)) for i in range(cfg.partition_m) for j in range(cfg.partition_n)]
        lines += [t.declare_lhs(tc, d, f.lhs(i)) for i in range(cfg.partition_m)]
        lines += [t.declare_rhs(tc, d, f.rhs(j)) for j in range(cfg.partition_n)]
        return "\n".join(line for line in lines if line)

    def init_accumulators(self, cfg, d):
        return "\n".join(self.tile.init_acc(cfg.tile, d, cfg.fragments.acc(i, j))
                         for i in range(cfg.partition_m) for j in range(cfg.partition_n))

    def _k_step(self, cfg, d, lhs_smem, rhs_smem, k: str, kk: int = 0) -> list[tuple[str, object]]:
        """(code, the event that follows it) for every step of k step ``kk`` (first k row ``k``):
        each lhs fragment load, each rhs fragment load, each tile matmul."""
        t, tc, f = self.tile, cfg.tile, cfg.fragments
        pm, pn, n = cfg.partition_m, cfg.partition_n, cfg.stage_k
        steps = [(t.load_lhs(tc, d, f.lhs(i), SmemTile(lhs_smem, cfg.lhs_ld, k, self._origin(cfg, "m", i))),
                  LhsLoaded(kk * pm + i, n * pm)) for i in range(pm)]
        steps += [(t.load_rhs(tc, d, f.rhs(j), SmemTile(rhs_smem, cfg.rhs_ld, k, self._origin(cfg, "n", j))),
                   RhsLoaded(kk * pn + j, n * pn)) for j in range(pn)]
        steps += [(t.execute(tc, d, f.lhs(i), f.rhs(j), f.acc(i, j)),
                   TileMatmulCompleted((kk * pm + i) * pn + j, n * pm * pn)) for i in range(pm) for j in range(pn)]
        return steps

    def execute(self, cfg, d, lhs_smem, rhs_smem, listener: StageEventListener) -> str:
        n = cfg.stage_k
        unrolled = [self._k_step(cfg, d, lhs_smem, rhs_smem, str(kk), kk) for kk in range(n)]
        # Ask in execution order, so a listener sees the events as the kernel will run them.
        begin = listener.on_event(Begin())
        injected = [[listener.on_event(ev) for _, ev in steps] for steps in unrolled]
        finish = listener.on_event(Finish())
        out = [begin] if begin else []
        if not any(code for per_step in injected for code in per_step):
            # Nothing to interleave: a compact loop (the compiler unrolls it) keeps sources small.
            body = [code for code, _ in self._k_step(cfg, d, lhs_smem, rhs_smem, "kk")]
            out += [f"#pragma unroll\nfor (int kk = 0; kk < {n}; ++kk) {{", *body, "}"]
        else:
            for steps, extra in zip(unrolled, injected):
                for (code, _), inject in zip(steps, extra):
                    out.append(code)
                    if inject:
                        out.append(inject)
        if finish:
            out.append(finish)
        return "\n".join(out)

    def write(self, cfg, d, writer: Writer) -> str:
        lines = []
        for i in range(cfg.partition_m):
            for j in range(cfg.partition_n):
                m0, n0 = self._origin(cfg, "m", i), self._origin(cfg, "n", j)
                lines.append(stores(writer, [writer(f"{m0} + {row}", f"{n0} + {col}", value)
                                             for row, col, value in self.tile.acc_elements(cfg.tile, cfg.fragments.acc(i, j))]))
        return "\n".join(line for line in lines if line)
