"""Specialized: the double-buffering pipeline with its loads moved onto load-only units.

The stage's units only compute (register tiles, unit-partitioned stage); extra units appended after
them only load, one K slice ahead. ``SpecializedSelection.load_units`` sets how many (0, or a plain
`UnitSelection`: half as many as compute units, rounded up to whole planes). Same tiling rule as
"simple_unit": its stages have 256 compute units (64 on CPU OpenCL for large problems), a multiple
of the CUDA warp.
"""
from __future__ import annotations

from ..global_.specialized import SpecializedGlobalMatmul
from .base import register
from .simple import SimpleUnitAlgorithm


@register
class SpecializedAlgorithm(SimpleUnitAlgorithm):
    name = "specialized"
    selection_name = "SpecializedSelection"
    global_ = SpecializedGlobalMatmul

    def select(self, problem, dialect):
        # Its load-only units (half as many) run every load of a stage: on the 128 x 128 x 16 stage
        # the rule picks for unaligned float32 each would hold 32 element loads in flight, and ptxas
        # spills 716 bytes under the 168-register cap of 384 units (128 x 128 x 8: 180 bytes).
        sel = dict(super().select(problem, dialect))
        if sel["stage_m"] * sel["stage_n"] >= 128 * 128 and sel["stage_k"] > 8:
            sel["stage_k"] = 8
        return sel


#: A unit tiling plus the number of load-only units (``load_units``; 0: the global's default).
SpecializedSelection = SpecializedAlgorithm.selection_class
