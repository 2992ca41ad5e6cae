"""Simple: a single-stage global matmul (load, barrier, compute, barrier) under a partitioned batch.

``simple_unit``: register tiles on a unit-partitioned stage (every backend and dtype). The
``simple`` family (families.py) takes its tensor-core members where they set up, else this one.
"""
from __future__ import annotations

from ..global_.read.vector_loader import VectorLoader
from ..selector.unit import select_unit_tiling, unit_tuning_space
from .base import Algorithm, register


@register
class SimpleUnitAlgorithm(Algorithm):
    name = "simple_unit"
    selection_name = "UnitSelection"
    # 16-byte global reads where the selection's vector_width and the operands' alignment allow,
    # the cyclic loader's scalar reads otherwise.
    lhs_loader = VectorLoader
    rhs_loader = VectorLoader

    def select(self, problem, dialect):
        return select_unit_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return unit_tuning_space(self.select(problem, dialect))


#: The tiling of the register-tile algorithms (simple_unit, double_buffering_unit, ordered_unit,
#: specialized_unit): the knobs of the register tile, the unit-partitioned stage, the vector
#: loaders and the batch level.
UnitSelection = SimpleUnitAlgorithm.selection_class
