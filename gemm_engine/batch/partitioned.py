"""Partitioned batch matmul: one cube per output tile per batch entry, in a chosen dispatch order."""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import KERNEL_NAME, BatchConfig, BatchMatmul
from .dispatch import DISPATCHES


class PartitionedBatchMatmul(BatchMatmul):
    name = "partitioned_batch"

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        dispatch = getattr(selection, "dispatch", "row_major")
        if dispatch not in DISPATCHES:
            raise SetupError(self.name, f"unknown dispatch {dispatch!r}; known: {sorted(DISPATCHES)}")
        return BatchConfig(global_=self.global_.setup(problem, selection, dialect), dispatch=dispatch)

    def cube_count(self, cfg: BatchConfig, problem: MatmulProblem) -> int:
        stage = cfg.global_.stage
        return problem.batch * (-(-problem.m // stage.stage_m)) * (-(-problem.n // stage.stage_n))

    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        g = cfg.global_
        lhs_t = d.storage_type(g.lhs_loader.operand.element)
        rhs_t = d.storage_type(g.rhs_loader.operand.element)
        out_t = d.storage_type(g.out)
        stage = g.stage
        params = ",\n    ".join([
            f"const GLOBAL {lhs_t}* RESTRICT lhs_base, i64 lhs_offset, i64 lhs_ld, i64 lhs_batch_stride",
            f"const GLOBAL {rhs_t}* RESTRICT rhs_base, i64 rhs_offset, i64 rhs_ld, i64 rhs_batch_stride",
            f"GLOBAL {out_t}* RESTRICT out_base, i64 out_offset, i64 out_ld, i64 out_batch_stride",
            "i64 M, i64 N, i64 K",
        ])
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({cfg.units}) void {KERNEL_NAME}(\n    {params})",
            "{",
            self.global_.shared_declarations(g, d),
            "const i64 cube = CUBE_ID;",
            f"const i64 cubes_m = (M + {stage.stage_m - 1}) / {stage.stage_m};",
            f"const i64 cubes_n = (N + {stage.stage_n - 1}) / {stage.stage_n};",
            DISPATCHES[cfg.dispatch].render(),
            f"const GLOBAL {lhs_t}* lhs = lhs_base + lhs_offset + b * lhs_batch_stride;",
            f"const GLOBAL {rhs_t}* rhs = rhs_base + rhs_offset + b * rhs_batch_stride;",
            f"GLOBAL {out_t}* out = out_base + out_offset + b * out_batch_stride;",
            f"const i64 cube_m0 = cube_row * {stage.stage_m};",
            f"const i64 cube_n0 = cube_col * {stage.stage_n};",
            self.global_.body(g, d),
            "}",
        ])
