"""Specialized (register tiles): the double-buffering pipeline with its loads moved onto load-only
units.

``specialized_unit``: the stage's units only compute (register tiles, unit-partitioned stage); extra
units appended after them only load, one K slice ahead. ``SpecializedSelection.load_units`` sets how
many (0, or a plain `UnitSelection`: half as many as compute units, rounded up to whole planes).
Its tiling is simple_unit's with a shorter stage_k on large stages (selector/unit.py). The
``specialized`` family (families.py) takes the Hopper member (specialized_wgmma) first where it sets up.
"""
from __future__ import annotations

from ..global_.specialized import SpecializedGlobalMatmul
from ..selector.unit import specialized_unit_tiling
from .base import register
from .simple import SimpleUnitAlgorithm


@register
class SpecializedUnitAlgorithm(SimpleUnitAlgorithm):
    name = "specialized_unit"
    selection_name = "SpecializedSelection"
    global_ = SpecializedGlobalMatmul

    def select(self, problem, dialect):
        return specialized_unit_tiling(problem, dialect)


#: The register member under its name from before ``specialized`` became a family: what users
#: composed with it (subclasses swapping slots) still composes.
SpecializedAlgorithm = SpecializedUnitAlgorithm

#: A unit tiling plus the number of load-only units (``load_units``; 0: the global's default).
SpecializedSelection = SpecializedUnitAlgorithm.selection_class
