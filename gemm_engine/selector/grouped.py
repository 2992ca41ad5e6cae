"""Tilings of the grouped variants (algorithms/grouped.py) where a group's few rows call for another
tile than the dense rule's for the batched problem one group looks like.

The Hopper TMA pipeline (specialized_wgmma): a group of at most 64 rows (decode, hundreds of small
experts) takes the 64-row tile (one consumer warpgroup, 64 x 128, six slots): a 128-row tile would
compute twice the rows for nothing, and twice as many 64 x 128 tiles fill the last wave of a
weight-streaming grid better (Mixtral decode: 896 tiles on 132 multiprocessors, 6.8 waves, against
3.4 of 128 x 256). Promoting problems (fp8, block scales) of at most 128 rows a group take 128 x 128
(two consumer warpgroups), not the dense rule's 192 x 128 for many tiles, and at most 64 rows the
64 x 128 tile; both add each slice into the float32 sums behind the next slice's batch. Larger
16-bit groups take two ping-pong copies of a 128 x 128 tile, one's epilogue under the other's main
loop; other larger groups keep the dense rule's tile.

Measured (H100, bf16, graph replays, bench/results/h100/grouped_probe.md): the 64-row tile with
eight ring slots streamed 256 experts' weights (7168 -> 4096, 32 tokens each) 3.4% faster than
with six (5.09 ms against 5.27: 2.86 TB/s); the ping-pong 128 x 128 tiles ran Mixtral's
up-projection (8 experts, 4096 tokens) 3.9% faster than the dense rule's 128 x 256, 64 experts of
128 tokens 2.7% faster, skewed routing 1.7%, Dirichlet routing 0.3% slower.
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.dialect import Dialect
from ..global_.promotion import wants_promotion
from ..problem import MatmulProblem
from .specialized_wgmma import preset, store_plan

#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages) of few-row groups.
SMALL_GROUP = (1, 1, 1, 128, 8)
PROMOTED_GROUP = (2, 1, 1, 128, 6)
#: Larger 16-bit groups: ping-pong copies of (partition_m x 64) x tile_n, with these ring slots.
PINGPONG_GROUP = dict(warpgroups_m=1, warpgroups_n=1, partition_m=2, tile_n=128, stages=4, schedule="pingpong")


def grouped_specialized_tiling(typical: MatmulProblem, dialect: Dialect, dense: Mapping) -> dict:
    """The tiling of ``grouped_specialized_wgmma`` for groups like ``typical`` (the dense batched
    problem one group looks like), ``dense`` the dense rule's for it."""
    promoted = wants_promotion(typical)
    if typical.m <= 64:
        shape = SMALL_GROUP
    elif promoted and typical.m <= 128:
        shape = PROMOTED_GROUP
    elif not promoted and typical.lhs.name in ("float16", "bfloat16"):
        g = PINGPONG_GROUP
        plan = store_plan(typical, dialect, g["partition_m"] * 64, g["tile_n"], g["stages"], groups=2)
        return {**g, **plan}
    else:
        return dict(dense)
    wm, wn, pm, tn, stages = shape
    behind = dict(promote_behind=True) if promoted else {}
    return preset(wm, wn, pm, tn, **store_plan(typical, dialect, wm * pm * 64, wn * tn, stages), **behind)
