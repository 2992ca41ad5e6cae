"""``skinny``: M = 1 (vector-matrix) and N = 1 (matrix-vector) products, built for memory bandwidth.

The skinny global matmul (`global_.skinny`) under the partitioned batch level: the kernel
signature, batch entries, dispatch and the fused epilogue are the batch level's. Any other shape is
refused with a SetupError, so the ``auto`` family can try it first.

``skinny_split_k`` is the same global matmul under the split-K batch level: for a big operand
contiguous along the outputs (M = 1 with a row-major rhs, as in ``x @ W``), each cube's units
read whole 16-byte vectors of one long run of a K row (256 units: 4 KiB per row), and K is split
over cubes instead of over the units of a cube; a second kernel adds the partials in a fixed order.
Long contiguous runs per row and a wave of cubes each with many loads in flight are what reach the
read bandwidth (bench/SELECTION_NOTES.md, "Skinny tilings"). Their tilings: selector/skinny.py.
"""
from __future__ import annotations

from ..batch.split_k import SplitKBatchMatmul
from ..global_.skinny import SkinnyGlobalMatmul
from ..selector.skinny import resolve_tiling, select_split_skinny, skinny_tuning_space, split_skinny_tuning_space
from .base import Algorithm, register


@register
class SkinnyAlgorithm(Algorithm):
    name = "skinny"
    selection_name = "SkinnySelection"
    # No tile, stage, loaders or writer: the global level reads global memory itself.
    tile = stage = lhs_loader = rhs_loader = writer = None
    global_ = SkinnyGlobalMatmul

    def select(self, problem, dialect):
        return resolve_tiling(self.selection_class(), problem, dialect)

    def tuning_space(self, problem, dialect):
        return skinny_tuning_space(self.selection_class, problem, dialect)


#: The skinny kernel's tiling (see `global_.skinny`); a knob left at 0 is chosen for the problem
#: and device (`selector.skinny.resolve_tiling`), so a sweep may fix one and keep the rest.
SkinnySelection = SkinnyAlgorithm.selection_class


@register
class SkinnySplitKAlgorithm(SkinnyAlgorithm):
    name = "skinny_split_k"
    selection_name = "SkinnySplitKSelection"
    batch = SplitKBatchMatmul

    def select(self, problem, dialect):
        return select_split_skinny(problem, dialect)

    def tuning_space(self, problem, dialect):
        return split_skinny_tuning_space(problem, dialect)
