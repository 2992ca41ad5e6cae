"""Single-stage global matmul: load, barrier, compute, barrier, for every step of K.

The simplest correct pipeline: no overlap between loads and compute inside a cube (the hardware
overlaps across cubes). Double buffering and specialization refine exactly this loop.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..stage.events import StageEventListener
from .base import GlobalConfig, GlobalMatmul
from .loaders import OperandTile


def operand_tiles(problem: MatmulProblem, stage) -> tuple[OperandTile, OperandTile]:
    """The lhs and rhs stage tiles a global matmul loads, with the bounds checks the problem needs."""
    check_m, check_n, check_k = (problem.m % stage.stage_m != 0, problem.n % stage.stage_n != 0,
                                 problem.k % stage.stage_k != 0)
    smem = stage.tile.smem_word
    lhs = OperandTile("lhs", problem.lhs, Layout(problem.lhs_layout), stage.stage_m, stage.stage_k,
                      check_m, check_k, stage.lhs_ld, k_along_rows=False, smem_word=smem)
    rhs = OperandTile("rhs", problem.rhs, Layout(problem.rhs_layout), stage.stage_k, stage.stage_n,
                      check_k, check_n, stage.rhs_ld, k_along_rows=True, smem_word=smem)
    return lhs, rhs


class SimpleGlobalMatmul(GlobalMatmul):
    name = "simple_global"

    #: The listener handed to the stage; subclasses (or users) may swap it.
    listener_class = StageEventListener
    #: Shared-memory stages per operand (double buffering uses two).
    buffers = 1

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig:
        stage_cfg = self.stage.setup(problem, selection, dialect)
        lhs, rhs = operand_tiles(problem, stage_cfg)
        cfg = GlobalConfig(
            stage=stage_cfg,
            lhs_loader=self.lhs_loader.setup(lhs, stage_cfg.units),
            rhs_loader=self.rhs_loader.setup(rhs, stage_cfg.units),
            out=problem.out,
            check_m=lhs.check_rows, check_n=rhs.check_cols, check_k=lhs.check_cols,
        )
        self.check_shared_memory(cfg, dialect)
        return cfg

    def check_shared_memory(self, cfg: GlobalConfig, dialect: Dialect):
        need = cfg.shared_memory_bytes * self.buffers
        # Static shared memory is capped at 48 KiB per cube on CUDA without an opt-in.
        limit = min(dialect.device.max_shared_memory, 48 * 1024)
        if need > limit:
            raise SetupError(self.name, f"needs {need} bytes of shared memory, the device allows {limit}")

    def shared_declarations(self, cfg, d):
        lt = d.c_type(cfg.lhs_loader.operand.smem_type_word)
        rt = d.c_type(cfg.rhs_loader.operand.smem_type_word)
        return (f"LOCAL {lt} lhs_smem[{self.buffers * cfg.stage.lhs_smem_elems}];\n"
                f"LOCAL {rt} rhs_smem[{self.buffers * cfg.stage.rhs_smem_elems}];")

    def load_tasks(self, cfg: GlobalConfig, d: Dialect, lhs_smem: str, rhs_smem: str, k0: str) -> list[str]:
        """Every task (lhs then rhs) that fills one stage with the K slice starting at ``k0``."""
        return (self.lhs_loader.tasks(cfg.lhs_loader, d, lhs_smem, "cube_m0", k0, "M", "K")
                + self.rhs_loader.tasks(cfg.rhs_loader, d, rhs_smem, k0, "cube_n0", "K", "N"))

    def body(self, cfg, d):
        sk = cfg.stage.stage_k
        return "\n".join([
            self.stage.declare(cfg.stage, d),
            self.stage.init_accumulators(cfg.stage, d),
            f"for (i64 k0 = 0; k0 < K; k0 += {sk}) {{",
            *self.load_tasks(cfg, d, "lhs_smem", "rhs_smem", "k0"),
            "SYNC_CUBE();",
            self.stage.execute(cfg.stage, d, "lhs_smem", "rhs_smem", self.listener_class()),
            "SYNC_CUBE();",
            "}",
            self.write_output(cfg, d),
        ])
