"""Split-K: the fast compositions with the split-K batch level (batch/split_k.py) swapped in.

``split_k`` is the family (wgmma, then mma.sync, then register FMA: the first that sets up);
``split_k_unit`` / ``split_k_mma`` / ``split_k_wgmma`` are its members. Each is its base algorithm
with one class attribute changed, as a user would compose it. ``auto`` takes the family only for
problems with little output and a long K (its rule in selector/rules.py).
"""
from __future__ import annotations

from ..batch.split_k import SplitKBatchMatmul
from ..selector.split_k import split_k_tuning_space
from .base import register
from .family import AlgorithmFamily
from .pipelined import PipelinedMmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .wgmma import PipelinedWgmmaAlgorithm


class _SplitCounts:
    """Tuning space of a split-K member: the base algorithm's chosen tiling with the batch level's
    split count (choose_splits) and a few fixed counts around it (selector/split_k.py)."""

    def tuning_space(self, problem, dialect):
        return split_k_tuning_space(self.select(problem, dialect))


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
