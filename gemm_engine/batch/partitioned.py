"""Partitioned batch matmul: one cube per output tile per batch entry, in a chosen dispatch order,
or (persistent) about one cube per compute unit, each looping over tiles in that order.

The selection spells it ``dispatch`` (a registered order, batch/dispatch.py; the algorithm's
dispatch slot is the default), ``dispatch_width`` (the strip or group width of the orders that have
one) and ``persistent`` (0: one cube per tile; n > 0: n cubes per compute unit, never more than
there are tiles).
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.comments import plain_fields, region
from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from .base import KERNEL_NAME, BatchConfig, BatchMatmul, CubeScope, DispatchScope, OperandRef, dispatch_for
from ..codegen.signature import KernelSignature, index, operand_params


class PartitionedBatchMatmul(BatchMatmul):
    name = "partitioned_batch"
    passes_weights = True
    knobs = (Knob("persistent", 0, "cubes per compute unit of a persistent launch, each looping over "
                                   "tiles (0: one cube per tile)"),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        dispatch = dispatch_for(selection.dispatch, selection.dispatch_width, self.name)
        persistent = selection.persistent
        if persistent < 0:
            raise SetupError(self.name, f"persistent={persistent!r}: expected cubes per compute unit (>= 0)")
        if persistent and not self.global_.reentrant:
            raise SetupError(self.name, f"persistent={persistent}: {self.global_.name} is not reentrant "
                                        f"(its body may run only once per cube)")
        global_ = replace(self.global_.setup(problem, selection, dialect), epilogue=problem.epilogue)
        return BatchConfig(global_=global_, dispatch=dispatch,
                           persistent_cubes=persistent * max(1, dialect.device.compute_units))

    def tiles(self, cfg: BatchConfig, problem: MatmulProblem) -> int:
        stage = cfg.global_.stage
        return problem.batch * (-(-problem.m // stage.stage_m)) * (-(-problem.n // stage.stage_n))

    def cube_count(self, cfg: BatchConfig, problem: MatmulProblem) -> int:
        tiles = self.tiles(cfg, problem)
        return min(tiles, cfg.persistent_cubes) if cfg.persistent_cubes else tiles

    # -- the kernel, in pieces a subclass may replace (split-K and K-major do) ---------------------
    def signature(self, cfg: BatchConfig) -> KernelSignature:
        g = cfg.global_
        return KernelSignature((*operand_params("lhs", g.lhs_loader.operand.element.storage),
                                *operand_params("rhs", g.rhs_loader.operand.element.storage),
                                *operand_params("out", cfg.result.storage, writable=True),
                                *index("M", "N", "K", "batch"),
                                *cfg.epilogue.params(),
                                *(g.weights.params() if g.weights is not None else ())))

    def scope(self, cfg: BatchConfig, d: Dialect | None = None) -> CubeScope:
        """What the global level's body reads: the names `pointers` declares and the kernel's."""
        return CubeScope(lhs=OperandRef("lhs", "lhs_ld"), rhs=OperandRef("rhs", "rhs_ld"),
                         out=OperandRef("out", "out_ld"))

    def cube_index(self, cfg: BatchConfig) -> list[str]:
        """Statements that define ``cube``, the linear tile index the dispatch order maps."""
        return [] if cfg.persistent_cubes else ["const i64 cube = CUBE_ID;"]

    def pointers(self, cfg: BatchConfig, d: Dialect) -> list[str]:
        """Statements that move the operand pointers to batch entry ``b``."""
        g = cfg.global_
        return [self.operand_pointer(cfg, d, "lhs"), self.operand_pointer(cfg, d, "rhs"),
                f"GLOBAL {d.storage_type(g.out)}* out = out_base + out_offset + b * out_batch_stride;",
                *g.epilogue.pointers(d), *(g.weights.pointers(d) if g.weights is not None else ())]

    def operand_pointer(self, cfg: BatchConfig, d: Dialect, op: str) -> str:
        """Statement declaring operand ``op`` ("lhs" / "rhs") at batch entry ``b``."""
        t = d.storage_type(cfg.global_.loader(op).operand.element)
        return f"const GLOBAL {t}* {op} = {op}_base + {op}_offset + b * {op}_batch_stride;"

    def body(self, cfg: BatchConfig, d: Dialect) -> str:
        g, level = cfg.global_, self.global_
        parts = [f"{slot} {type(c).__name__}" for slot, c in (("lhs", level.lhs_loader), ("rhs", level.rhs_loader),
                                                             ("writer", level.writer)) if c is not None]
        extra = "| " + " ".join(parts) if parts else ""
        return "\n".join([region("global", level, g, extra), level.body(g, d, self.scope(cfg, d))])

    def kernel_head(self, cfg: BatchConfig, d: Dialect) -> list[str]:
        """The kernel's declaration, opening brace, shared memory and tile counts (``cubes_m``,
        ``cubes_n``): what every partitioned kernel starts with."""
        g = cfg.global_
        stage = g.stage
        attributes = " ".join(filter(None, (self.launch_bounds(cfg), self.kernel_attributes(cfg, d))))
        return [f"KERNEL {attributes} void {KERNEL_NAME}(\n    {self.signature(cfg).render(d)})",
                "{",
                region("batch", self, cfg, f"| dispatch {cfg.dispatch.name} {plain_fields(cfg.dispatch)}".rstrip()),
                self.global_.shared_declarations(g, d),
                *self.cube_index(cfg),
                f"const i64 cubes_m = (M + {stage.stage_m - 1}) / {stage.stage_m};",
                f"const i64 cubes_n = (N + {stage.stage_n - 1}) / {stage.stage_n};"]

    def dispatch_scope(self, cfg: BatchConfig) -> DispatchScope:
        """What the dispatch order reads and defines here: ``cube``, ``cubes_m``, ``cubes_n`` (the
        kernel head's), ``batch``; ``b`` (which `pointers` reads), ``cube_row``, ``cube_col``."""
        return DispatchScope()

    def tile_origin(self, cfg: BatchConfig, d: Dialect) -> list[str]:
        """Statements that, from ``cube``, define the tile's batch entry, pointers and origin."""
        stage, s = cfg.global_.stage, self.dispatch_scope(cfg)
        return [cfg.dispatch.define(s, self.name), *self.pointers(cfg, d),
                f"const i64 cube_m0 = {s.row} * {stage.stage_m};",
                f"const i64 cube_n0 = {s.col} * {stage.stage_n};"]

    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        persistent = cfg.persistent_cubes > 0
        return "\n".join([
            *self.kernel_head(cfg, d),
            # Persistent: tiles CUBE_ID, CUBE_ID + CUBE_COUNT, ... The loop body is a block, so each
            # tile's run of the global body declares (and zeroes) its state afresh.
            *(["for (i64 cube = CUBE_ID; cube < batch * cubes_m * cubes_n; cube += CUBE_COUNT) {"]
              if persistent else []),
            *self.tile_origin(cfg, d),
            self.body(cfg, d),
            # Between two tiles: no unit may load the next tile's slices into shared memory another
            # unit still reads. Every unit of a cube runs the same tiles, so every unit gets here.
            *(["SYNC_CUBE();", "}"] if persistent else []),
            "}",
        ])
