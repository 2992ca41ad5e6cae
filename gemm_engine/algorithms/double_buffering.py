"""Double buffering: the simple algorithm's register tiles and unit stage, with the global matmul
that overlaps the next K slice's loads with the current slice's compute.

Same tiling rule as "simple": its largest stages (f64, 64 x 64 x 16) need 2 x 17 KiB of shared
memory with two buffers, inside the 48 KiB static limit. A tensor-core variant swaps
`tile`/`stage` and `select`.
"""
from __future__ import annotations

from ..global_.double_buffering import DoubleBufferingGlobalMatmul
from .base import Algorithm, register
from .simple import select_unit_tiling


@register
class DoubleBufferingAlgorithm(Algorithm):
    name = "double_buffering"
    global_ = DoubleBufferingGlobalMatmul

    def select(self, problem, dialect):
        return select_unit_tiling(problem, dialect)
