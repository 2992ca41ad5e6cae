"""Single-stage global matmul: load, barrier, compute, barrier, for every step of K.

The simplest correct pipeline: no overlap between loads and compute inside a cube (the hardware
overlaps across cubes). Double buffering and specialization refine exactly this loop.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..dtypes import PACKED_WORDS
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..compose.capabilities import SMEM_STAGE
from .base import TASK_LOADER, GlobalConfig, GlobalMatmul
from .read.loaders import LoaderConfig, OperandTile


def operand_tiles(problem: MatmulProblem, stage, tile_class=OperandTile, **extra) -> tuple[OperandTile, OperandTile]:
    """The lhs and rhs stage tiles a global matmul loads, with the bounds checks the problem needs,
    each operand's vector alignment, its extent along its contiguous axis and whether a grouped
    problem's groups start anywhere along that axis."""
    check_m, check_n, check_k = problem.checks(stage.stage_m, stage.stage_n, stage.stage_k)
    smem = stage.tile.smem_word
    lhs_layout, rhs_layout = Layout(problem.lhs_layout), Layout(problem.rhs_layout)
    dense = problem.groups is None
    lhs = tile_class("lhs", problem.lhs, lhs_layout, stage.stage_m, stage.stage_k, check_m, check_k,
                     stage.lhs_ld, k_along_rows=False, smem_word=smem, align=problem.lhs_align,
                     extent=problem.k if lhs_layout is Layout.ROW else problem.m, ragged=problem.ragged_contiguous("lhs"),
                     line_extent=problem.m if dense and lhs_layout is Layout.ROW else 0, **extra.get("lhs", {}))
    # A quantized rhs is read as its packed words, dequantized into the stage's element words.
    quantized = {} if problem.weights is None else {"weights": problem.weights}
    rhs = tile_class("rhs", PACKED_WORDS if quantized else problem.rhs, rhs_layout, stage.stage_k, stage.stage_n,
                     check_k, check_n, stage.rhs_ld, k_along_rows=True, smem_word=stage.tile.rhs_smem_word,
                     align=problem.rhs_align, extent=problem.n if rhs_layout is Layout.ROW else problem.k,
                     ragged=problem.ragged_contiguous("rhs"),
                     line_extent=problem.n if dense and rhs_layout is Layout.COL else 0,
                     **quantized, **extra.get("rhs", {}))
    return lhs, rhs


class SimpleGlobalMatmul(GlobalMatmul):
    name = "simple_global"
    requires = (Requirement.of("stage", SMEM_STAGE),
                Requirement.of("lhs_loader", TASK_LOADER, why="it places whole load tasks before its barrier"),
                Requirement.of("rhs_loader", TASK_LOADER, why="it places whole load tasks before its barrier"))
    #: Each run declares its accumulators and loop state afresh and ends past a barrier with no
    #: load in flight; double buffering, ordered and specialized (checked too) only add state of
    #: the same kind (buffers selected by a per-run ``cur``, per-run registers).
    reentrant = True

    #: Shared-memory stages per operand (double buffering uses two).
    buffers = 1
    #: The config `setup` builds: a subclass may add properties (e.g. more units per cube).
    config_class = GlobalConfig

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig:
        stage_cfg = self.setup_stage(problem, selection, dialect)
        lhs, rhs = self.operand_tiles(problem, stage_cfg)
        units = self.loading_units(stage_cfg, selection, dialect)
        cfg = self.config_class(
            stage=stage_cfg,
            lhs_loader=self.lhs_loader.setup(lhs, units, selection),
            rhs_loader=self.rhs_loader.setup(rhs, units, selection),
            out=problem.out,
            check_m=lhs.check_rows, check_n=rhs.check_cols, check_k=lhs.check_cols,
            writer=self.writer.setup(problem, selection, dialect),
            weights=problem.weights,
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

    def load_tasks(self, cfg: GlobalConfig, d: Dialect, scope, lhs_smem: str, rhs_smem: str, k0: str,
                   unit: str = "UNIT_ID") -> list[str]:
        """Every task (lhs then rhs) that fills one stage with the K slice starting at ``k0``,
        run by the loading unit ``unit`` (see `Loader.tasks`)."""
        return (self.lhs_loader.tasks(cfg.lhs_loader, d, scope.lhs, lhs_smem, scope.m0, k0, scope.m, scope.k, unit)
                + self.rhs_loader.tasks(cfg.rhs_loader, d, scope.rhs, rhs_smem, k0, scope.n0, scope.k, scope.n, unit))

    def body(self, cfg, d, scope):
        sk = cfg.stage.stage_k
        listener = self.chain()
        return "\n".join([
            *self.kernel_start(listener),
            self.stage.declare(cfg.stage, d),
            self.stage.init_accumulators(cfg.stage, d),
            f"for (i64 k0 = 0; k0 < {scope.k}; k0 += {sk}) {{",
            *self.load_tasks(cfg, d, scope, "lhs_smem", "rhs_smem", "k0"),
            "SYNC_CUBE();",
            self.stage.execute(cfg.stage, d, "lhs_smem", "rhs_smem", listener),
            "SYNC_CUBE();",
            "}",
            *self.before_store(listener),
            self.write_output(cfg, d, scope),
        ])
