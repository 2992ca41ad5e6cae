"""Tilings of the AMD and Intel matrix-core algorithms (algorithms/matrix_cores.py).

Unmeasured: no AMD or Intel GPU has run them (the tiles are compiled offline only). The tiling is
the plane stage's 2 x 2 planes, each 2 x 2 instruction tiles of 16 x 16 (AMD) or 4 x 2 of 8 x N
(Intel DPAS), stage_k two instruction k's of 16-bit operands or four of f32 / f64's k = 4.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem


def select_matrix_tiling(problem: MatmulProblem, dialect: Dialect, rows_per_tile: int) -> dict:
    """2 x 2 planes; each 32 rows by 2 instruction tiles along n; stage_k 32 (16-bit) or 16."""
    sixteen = problem.lhs.itemsize == 2
    return dict(planes_m=2, planes_n=2, partition_m=max(1, 32 // rows_per_tile), partition_n=2,
                stage_k=32 if sixteen else 16)
