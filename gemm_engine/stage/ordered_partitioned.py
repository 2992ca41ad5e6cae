"""Unit-partitioned stage whose lhs comes from registers the unit filled itself, not shared memory.

For the "ordered" global matmul: each unit holds the lhs values of its own ``tile_m`` rows of the
stage for the whole K slice in a register array ``lhs_regs[stage_k][tile_m]`` (declared here,
flattened k-major: element ``(k, i)`` at ``lhs_regs[k * tile_m + i]``), filled by the global level
before ``execute``. Only the lhs fragment load differs from `UnitPartitionedStage`: it reads that
array at a compile-time k (the stage renders its k loop unrolled, or with ``#pragma unroll``), so
the array stays in registers. Rhs is read from shared memory as before.

Within this stage ``execute``'s lhs argument names the register array rather than a shared-memory
stage; the stage still moves no global memory itself. Declared: it provides `REGISTER_LHS_STAGE`
(only a global level that fills the registers may run it) and needs an lhs loader that writes unit
registers (`UnitRowsLoader`).
"""
from __future__ import annotations

from ..compose.contracts import Requirement
from ..errors import SetupError
from ..compose.capabilities import K_MAJOR_SMEM, REGISTER_LHS_STAGE, UNIT_REGISTERS, UNIT_SCOPE
from ..tile.base import SmemTile
from .unit_partitioned import UnitPartitionedStage, UnitStageConfig

#: The register array holding this unit's lhs rows for one K slice.
LHS_REGS = "lhs_regs"


class OrderedPartitionedStage(UnitPartitionedStage):
    name = "ordered_partitioned_stage"
    provides = frozenset({REGISTER_LHS_STAGE})
    requires = (Requirement.of("tile", UNIT_SCOPE),
                Requirement.of("lhs_loader", UNIT_REGISTERS, why="it reads lhs from each unit's registers"),
                Requirement.of("rhs_loader", K_MAJOR_SMEM, why="it reads a k-major rhs stage"))

    @staticmethod
    def unit_rows(cfg: UnitStageConfig) -> tuple[str, int]:
        """(first stage row, row count) of the lhs this unit reads: what the global level loads
        into ``lhs_regs``. Units with the same ``part_m0`` need (and load) the same rows."""
        return "part_m0", cfg.tile.tile_m

    def setup(self, problem, selection, dialect, lhs_k_contiguous=False, rhs_k_contiguous=False) -> UnitStageConfig:
        cfg = super().setup(problem, selection, dialect, lhs_k_contiguous, rhs_k_contiguous)
        if cfg.partition_m != 1:
            # lhs_regs holds one tile's rows (`unit_rows`); more tiles along m would need more.
            raise SetupError(self.name, f"partition_m={cfg.partition_m}: the ordered stage holds the "
                                        f"lhs rows of one tile per unit (partition_m must be 1)")
        return cfg

    def declare(self, cfg: UnitStageConfig, d) -> str:
        ctype = d.c_type(cfg.tile.compute)
        return "\n".join([super().declare(cfg, d),
                          f"{ctype} {LHS_REGS}[{cfg.stage_k * cfg.tile.tile_m}];"])

    def _k_step(self, cfg, d, lhs_regs, rhs_smem, k: str, kk: int = 0):
        (_, lhs_event), *rest = super()._k_step(cfg, d, lhs_regs, rhs_smem, k, kk)
        # The register array read like a k-major tile of leading dimension tile_m, origin 0.
        load_l = self.tile.load_lhs(cfg.tile, d, cfg.fragments.lhs(0), SmemTile(lhs_regs, cfg.tile.tile_m, k, "0"))
        return [(load_l, lhs_event), *rest]
