"""``skinny``: M = 1 (vector-matrix) and N = 1 (matrix-vector) products, built for memory bandwidth.

The skinny global matmul (`global_.skinny`) under the partitioned batch level: the kernel
signature, batch entries, dispatch and the fused epilogue are the batch level's. Any other shape is
refused with a SetupError, so the ``auto`` family can try it first.

``skinny_split_k`` is the same global matmul under the split-K batch level: for a big operand
contiguous along the outputs (M = 1 with a row-major rhs, as in ``x @ W``), each cube's units
read whole 16-byte vectors of one long run of a K row (256 units: 4 KiB per row), and K is split
over cubes instead of over the units of a cube; a second kernel adds the partials in a fixed order.
Long contiguous runs per row and a wave of cubes each with many loads in flight are what reach the
read bandwidth (bf16 1 x 8192 x 8192 on the H100: 0.0488 ms against 0.0576 for the in-cube split,
bench/results/h100_2026-11-21_gemv_probe.txt).
"""
from __future__ import annotations

from ..batch.split_k import SplitKBatchMatmul
from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..global_.skinny import SkinnyGlobalMatmul
from ..selector.skinny import UNITS, pow2_at_least, pow2_at_most, resolve_tiling, skinny_axis
from ..problem import MatmulProblem
from .base import Algorithm, distinct, register


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
        # Loads in flight per unit: the one knob the bandwidth sweeps found sensitive.
        return distinct([self.select(problem, dialect)] + [
            resolve_tiling(self.selection_class(unroll=u), problem, dialect) for u in (2, 4, 8)])


#: The skinny kernel's tiling (see `global_.skinny`); a knob left at 0 is chosen for the problem
#: and device (`global_.skinny_tiling.resolve_tiling`), so a sweep may fix one and keep the rest.
SkinnySelection = SkinnyAlgorithm.selection_class


#: Loads in flight per unit of the split kernel (16 x 16 bytes x 256 units = 64 KiB per cube: the
#: probe's best, against 0.0499 ms for 8).
_SPLIT_UNROLL = 16
#: Smallest big operand worth a second kernel: below it the in-cube split is one launch.
_SPLIT_MIN_BYTES = 16 << 20


def select_split_skinny(problem: MatmulProblem, dialect: Dialect, splits: int = 0) -> dict:
    """Every unit one 16-byte vector of outputs (one slice of K per cube), up to 256 units; about
    one cube per compute unit, K cut into as many ranges as that takes, each a whole number of
    staged chunks of at least 256 rows."""
    along_n, dot = skinny_axis(problem)
    if dot:
        raise SetupError("skinny_split_k", "the big operand is contiguous along K: each output is a dot "
                                           "product of whole rows (skinny reads it so)")
    big = problem.rhs if along_n else problem.lhs
    per_unit = 16 // big.itemsize
    vectors = -(-(problem.n if along_n else problem.m) // per_unit)
    units = min(UNITS, pow2_at_least(vectors), pow2_at_most(dialect.device.max_threads_per_cube))
    tiles = problem.batch * -(-vectors // units)
    if not splits:   # at least two: a caller who names this algorithm wants K split
        splits = max(2, round(max(1, dialect.device.compute_units) / tiles))
    chunk = units * pow2_at_least(-(-problem.k // (splits * units)))
    return dict(outputs=units * per_unit, units=units, unroll=_SPLIT_UNROLL, chunk_k=chunk,
                split_k=-(-problem.k // chunk))


@register
class SkinnySplitKAlgorithm(SkinnyAlgorithm):
    name = "skinny_split_k"
    selection_name = "SkinnySplitKSelection"
    batch = SplitKBatchMatmul

    def select(self, problem, dialect):
        return select_split_skinny(problem, dialect)

    def tuning_space(self, problem, dialect):
        first = self.select(problem, dialect)
        return distinct([first] + [select_split_skinny(problem, dialect, s) for s in (8, 16, 32, 64)])
