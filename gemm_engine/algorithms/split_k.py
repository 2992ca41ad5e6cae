"""Split-K: the fast compositions with the split-K batch level (batch/split_k.py) swapped in.

``split_k`` is the family (wgmma, then mma.sync, then register FMA: the first that sets up);
``split_k_unit`` / ``split_k_mma`` / ``split_k_wgmma`` are its members. Each is its base algorithm
with one class attribute changed, as a user would compose it. ``auto`` reaches them through
`SplitKWhenWorthIt`, which only accepts problems with little output and a long K.
"""
from __future__ import annotations

from dataclasses import replace

from ..batch.split_k import SplitKBatchMatmul
from ..errors import SetupError
from .base import AlgorithmFamily, distinct, register
from .pipelined import PipelinedMmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .wgmma import PipelinedWgmmaAlgorithm


class _SplitCounts:
    """Tuning space of a split-K member: the base algorithm's chosen tiling with the batch level's
    split count (choose_splits) and a few fixed counts around it."""

    def tuning_space(self, problem, dialect):
        first = self.select(problem, dialect)
        return distinct([first] + [replace(first, split_k=s) for s in (4, 16, 64)])


@register
class SplitKUnitAlgorithm(_SplitCounts, SimpleUnitAlgorithm):
    name = "split_k_unit"
    batch = SplitKBatchMatmul


@register
class SplitKMmaAlgorithm(_SplitCounts, PipelinedMmaAlgorithm):
    name = "split_k_mma"
    batch = SplitKBatchMatmul


@register
class SplitKWgmmaAlgorithm(_SplitCounts, PipelinedWgmmaAlgorithm):
    name = "split_k_wgmma"
    batch = SplitKBatchMatmul


@register
class SplitKAlgorithm(AlgorithmFamily):
    name = "split_k"
    variants = (SplitKWgmmaAlgorithm, SplitKMmaAlgorithm, SplitKUnitAlgorithm)


class SplitKWhenWorthIt(SplitKAlgorithm):
    """``split_k`` for ``auto``: only where K is long against the output, so that the output tiles
    alone would leave compute units idle while each walks a long K: K >= 4 max(M, N) and K >= 1024,
    or a thin output (M or N at most 64) with K >= 2048 (16 x 8192 x 8192 f16 on the H100: 0.076 ms
    split against 0.096 unsplit, bench/results/h100_2026-11-21_issue5_full_float16_bfloat16.md),
    or exact float32 whose 64 x 64 tiles leave most compute units idle.
    The batch level then still refuses when the tiles already fill the device."""

    name = "split_k_when_worth_it"

    def setup(self, problem, dialect):
        long_k = problem.k >= max(1024, 4 * max(problem.m, problem.n))
        thin = min(problem.m, problem.n) <= 64 and problem.k >= 2048
        # Exact float32 on register FMA runs 64 x 64 stages: when those do not give half the compute
        # units a cube, K ranges do (512^3 f32 on the H100: 0.030 ms split in 4, 0.061 unsplit).
        tiles = problem.batch * -(-problem.m // 64) * -(-problem.n // 64)
        few_fma_tiles = (problem.lhs.name == "float32" and problem.precision == "default"
                         and problem.k >= 512 and 2 * tiles < dialect.device.compute_units)
        if not (long_k or thin or few_fma_tiles):
            raise SetupError(self.name, f"K = {problem.k} is not long against M = {problem.m}, "
                                        f"N = {problem.n}: the output tiles carry the parallelism")
        return super().setup(problem, dialect)
