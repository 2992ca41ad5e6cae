"""Specialized: the double-buffering pipeline with its loads moved onto load-only units.

The stage's units only compute (register tiles, unit-partitioned stage); extra units appended after
them only load, one K slice ahead. ``SpecializedSelection.load_units`` sets how many (0: a quarter of
the compute units, rounded up to whole planes). Same tiling rule as "simple": its stages have 256
compute units (64 on CPU OpenCL for large problems), a multiple of the CUDA warp.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..global_.specialized import SpecializedGlobalMatmul
from .base import Algorithm, register
from .simple import UnitSelection, select_unit_tiling


@dataclass(frozen=True)
class SpecializedSelection(UnitSelection):
    """A unit tiling plus the number of load-only units (0: the global matmul's default)."""

    load_units: int = 0


@register
class SpecializedAlgorithm(Algorithm):
    name = "specialized"
    global_ = SpecializedGlobalMatmul

    def select(self, problem, dialect):
        return SpecializedSelection(**asdict(select_unit_tiling(problem, dialect)))
