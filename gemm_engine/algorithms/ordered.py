"""Ordered: double buffering of rhs through shared memory, lhs loaded by each unit straight into
registers (`OrderedGlobalMatmul`, `OrderedPartitionedStage`, `UnitRowsLoader`).

``ordered_unit``: its tiling is simple_unit's outputs per unit as one contiguous tile (selector/
unit.py). Each unit holds ``stage_k x tile_m`` lhs values in registers on top of its accumulators:
64 with every tiling that rule picks (8 k rows x 8 for the CUDA float32 SGEMM shape, 16 x 4
otherwise), i.e. 128 32-bit registers for float64. The ``ordered`` family (families.py) has this one
member: no tensor-core stage reads lhs from unit registers.
"""
from __future__ import annotations

from ..global_.ordered import OrderedGlobalMatmul, UnitRowsLoader
from ..selector.unit import ordered_unit_tiling
from ..stage.ordered_partitioned import OrderedPartitionedStage
from .base import register
from .simple import SimpleUnitAlgorithm


@register
class OrderedUnitAlgorithm(SimpleUnitAlgorithm):
    name = "ordered_unit"
    stage = OrderedPartitionedStage
    global_ = OrderedGlobalMatmul
    lhs_loader = UnitRowsLoader

    def select(self, problem, dialect):
        return ordered_unit_tiling(problem, dialect)


#: The register member under its name from before ``ordered`` became a family: the README's
#: ``class OrderedSplitK(OrderedAlgorithm)`` swaps its slots and still composes.
OrderedAlgorithm = OrderedUnitAlgorithm
