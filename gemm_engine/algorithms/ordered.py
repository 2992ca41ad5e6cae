"""Ordered: double buffering of rhs through shared memory, lhs loaded by each unit straight into
registers (`OrderedGlobalMatmul`, `OrderedPartitionedStage`, `UnitRowsLoader`).

Same tiling rule as "simple_unit". Each unit holds ``stage_k x tile_m`` lhs values in registers on
top of its accumulators: 64 with every tiling that rule picks (8 k rows x 8 for the CUDA float32
SGEMM shape, 16 x 4 otherwise), i.e. 128 32-bit registers for float64.
"""
from __future__ import annotations

from ..global_.ordered import OrderedGlobalMatmul, UnitRowsLoader
from ..stage.ordered_partitioned import OrderedPartitionedStage
from .base import register
from .simple import SimpleUnitAlgorithm


@register
class OrderedAlgorithm(SimpleUnitAlgorithm):
    name = "ordered"
    stage = OrderedPartitionedStage
    global_ = OrderedGlobalMatmul
    lhs_loader = UnitRowsLoader

    def select(self, problem, dialect):
        # The ordered stage holds one tile's lhs rows per unit: the same outputs per unit as the
        # rule's choice, as one contiguous tile (partition_m = 1).
        # Its lhs_regs (stage_k x tile_m values) stay at 64 registers: stage_k shrinks if needed.
        sel = dict(super().select(problem, dialect))
        tile_m = sel["tile_m"] * sel.get("partition_m", 1)
        return {**sel, "tile_m": tile_m, "tile_n": sel["tile_n"] * sel.get("partition_n", 1), "partition_m": 1,
                "partition_n": 1, "partition": "contiguous", "stage_k": max(1, min(sel["stage_k"], 64 // tile_m))}
