"""The quantized wgmma kernel's tiling by problem (algorithms/quantized_wgmma.py), from the H100
measurements in bench/SELECTION_NOTES.md, "Quantized wgmma"."""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem


def wgmma_preset(problem: MatmulProblem, dialect: Dialect) -> dict:
    """quantized_wgmma's knobs: the level's defaults (two warpgroups of one 64-column A tile each,
    all of M's rows up to 256 a cube)."""
    return {}
