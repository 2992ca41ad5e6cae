"""Direct stage: the unit-partitioned stage reading its operands where they lie in global memory.

The global level hands it references (`OperandRef`: a pointer to the cube's tile at the current k
and the operand's leading dimension, known at run time) instead of shared-memory arrays; each tile
reads its fragments straight from there. On a CPU the caches do what shared memory does on a GPU
(a cube's micro-panels stay in L1 / L2 while it walks K), and nothing is copied: this is the stage
of the CPU path (algorithms/direct.py). A row-major lhs is read k-contiguous (one scalar per row),
a column-major one k-major; the rhs is read k-major (rows along n), the orientation vector tiles load.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..compose.capabilities import GLOBAL_OPERAND_STAGE, UNIT_SCOPE
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from ..tile.base import SmemTile
from .unit_partitioned import UnitPartitionedStage, UnitStageConfig


class DirectUnitStage(UnitPartitionedStage):
    name = "direct_unit_stage"
    provides = frozenset({GLOBAL_OPERAND_STAGE})
    requires = (Requirement.of("tile", UNIT_SCOPE),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool = False,
              rhs_k_contiguous: bool = False) -> UnitStageConfig:
        if lhs_k_contiguous and not self.tile.reads_k_contiguous:
            raise SetupError(self.name, f"tile {self.tile.name!r} reads k-major operands only; the lhs is row-major")
        if rhs_k_contiguous:
            raise SetupError(self.name, "reads the rhs along n: it must be row-major (a column-major rhs is "
                                        "contiguous along k)")
        cfg = super().setup(problem, selection, dialect)
        # No shared memory: the leading dimensions are the operands' own (run-time values).
        return replace(cfg, lhs_ld=0, rhs_ld=0, lhs_k_contiguous=lhs_k_contiguous)

    @staticmethod
    def _operand(cfg, op: str, ref, k: str, origin: str) -> SmemTile:
        """Operand ``op``'s tile as it lies in global memory: ``ref`` is its `OperandRef` at the
        cube's tile and the current k."""
        return SmemTile(ref.ptr, ref.ld, k, origin, k_contiguous=op == "lhs" and cfg.lhs_k_contiguous)
