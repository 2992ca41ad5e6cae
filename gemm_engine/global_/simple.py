"""Single-stage global matmul: load, barrier, compute, barrier, for every step of K.

The simplest correct pipeline: no overlap between loads and compute inside a cube (the hardware
overlaps across cubes). Double buffering and specialization refine exactly this loop.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..stage.events import StageEventListener
from .base import GlobalConfig, GlobalMatmul
from .loaders import LoaderConfig, OperandTile


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
    #: Each run declares its accumulators and loop state afresh and ends past a barrier with no
    #: load in flight; double buffering, ordered and specialized (checked too) only add state of
    #: the same kind (buffers selected by a per-run ``cur``, per-run registers).
    reentrant = True

    #: The listener handed to the stage; subclasses (or users) may swap it.
    listener_class = StageEventListener
    #: Shared-memory stages per operand (double buffering uses two).
    buffers = 1
    #: The config `setup` builds: a subclass may add properties (e.g. more units per cube).
    config_class = GlobalConfig

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig:
        stage_cfg = self.stage.setup(problem, selection, dialect)
        lhs, rhs = self.operand_tiles(problem, stage_cfg)
        # The widest global vector each loader may read: the operand's alignment, capped by the
        # selection (1 unless it asks: a plain selection keeps scalar loads).
        # Narrowed to divide the problem's extent along the contiguous axis: a vector is then
        # wholly inside or outside the problem, and the loader needs no element-wise fallback.
        cap = getattr(selection, "vector_width", 1)

        def width(align: int, extent: int) -> int:
            w = min(cap, align)
            while w > 1 and extent % w:
                w //= 2
            return max(w, 1)

        lhs_extent = problem.k if lhs.layout is Layout.ROW else problem.m
        rhs_extent = problem.n if rhs.layout is Layout.ROW else problem.k
        lhs, rhs = (replace(lhs, vector=width(problem.lhs_align, lhs_extent)),
                    replace(rhs, vector=width(problem.rhs_align, rhs_extent)))
        units = self.loading_units(stage_cfg, selection, dialect)
        cfg = self.config_class(
            stage=stage_cfg,
            lhs_loader=self.lhs_loader.setup(lhs, units),
            rhs_loader=self.rhs_loader.setup(rhs, units),
            out=problem.out,
            check_m=lhs.check_rows, check_n=rhs.check_cols, check_k=lhs.check_cols,
        )
        self.check_shared_memory(cfg, dialect)
        return cfg

    def operand_tiles(self, problem: MatmulProblem, stage_cfg) -> tuple[OperandTile, OperandTile]:
        """The tiles the two loaders move (the stage's, by default)."""
        return operand_tiles(problem, stage_cfg)

    def loading_units(self, stage_cfg, selection, dialect: Dialect) -> int:
        """How many units share the loads: every unit of the stage, by default."""
        return stage_cfg.units

    def check_shared_memory(self, cfg: GlobalConfig, dialect: Dialect):
        need = cfg.shared_memory_bytes * self.buffers
        # Static shared memory is capped at 48 KiB per cube on CUDA without an opt-in.
        limit = min(dialect.device.max_shared_memory, 48 * 1024)
        if need > limit:
            raise SetupError(self.name, f"needs {need} bytes of shared memory, the device allows {limit}")

    def shared_declarations(self, cfg, d):
        return "\n".join([self.shared_array(cfg.lhs_loader, d, "lhs_smem", cfg.stage.lhs_smem_elems),
                          self.shared_array(cfg.rhs_loader, d, "rhs_smem", cfg.stage.rhs_smem_elems)])

    def shared_array(self, loader: LoaderConfig, d: Dialect, name: str, elems: int) -> str:
        """Declaration of one operand's shared-memory stages (``self.buffers`` of ``elems``)."""
        # 16-byte aligned: vector and ldmatrix accesses need it, whatever the element type.
        ctype = d.c_type(loader.operand.smem_type_word)
        return f"LOCAL {ctype} {name}[{self.buffers * elems}] ALIGN16;"

    def load_tasks(self, cfg: GlobalConfig, d: Dialect, lhs_smem: str, rhs_smem: str, k0: str,
                   unit: str = "UNIT_ID") -> list[str]:
        """Every task (lhs then rhs) that fills one stage with the K slice starting at ``k0``,
        run by the loading unit ``unit`` (see `Loader.tasks`)."""
        return (self.lhs_loader.tasks(cfg.lhs_loader, d, lhs_smem, "cube_m0", k0, "M", "K", unit)
                + self.rhs_loader.tasks(cfg.rhs_loader, d, rhs_smem, k0, "cube_n0", "K", "N", unit))

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
