"""Tilings of the grouped variants (algorithms/grouped.py) where a group's few rows call for another
tile than the dense rule's for the batched problem one group looks like.

The Hopper TMA pipeline (specialized_wgmma): a group of at most 64 rows (decode, hundreds of small
experts) takes the 64-row tile (one consumer warpgroup, 64 x 128, six slots): a 128-row tile would
compute twice the rows for nothing, and twice as many 64 x 128 tiles fill the last wave of a
weight-streaming grid better (Mixtral decode: 896 tiles on 132 multiprocessors, 6.8 waves, against
3.4 of 128 x 256). Promoting problems (fp8, block scales) of at most 128 rows a group take 128 x 128
(two consumer warpgroups), not the dense rule's 192 x 128 for many tiles, and at most 64 rows the
64 x 128 tile; both add each slice into the float32 sums behind the next slice's batch. Larger
groups keep the dense rule's tile.

Measured (H100, bf16, graph replays; bench/SELECTION_NOTES.md, "Grouped tiles"): the 64-row tile with
eight ring slots streamed 256 experts' weights (7168 -> 4096, 32 tokens each) 3.4% faster than
with six (5.09 ms against 5.27: 2.86 TB/s). Ping-pong 128 x 128 tiles ran Mixtral's
up-projection 3.9% faster than the dense rule's 128 x 256 there, but in the next run the
down-projection it was not tuned on fell behind a loop of torch.mm (0.873 ms against 0.754, where
the dense tile had matched the loop): not taken.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..codegen.dialect import Dialect
from ..global_.promotion import wants_promotion
from ..problem import MatmulProblem
from .conditions import quantized_decode_worth_it, quantized_wgmma_worth_it
from .quantized_wgmma import MIN_M
from .rules import Rule
from .specialized_wgmma import preset, store_plan

#: The quantized decode kernel's grouped tiling: 8-row tiles a cube (two where a group's rows are
#: few or, masked, only bounded by the slab; four past 16 rows) and planes a cube.
DECODE_ROW_TILES = (2, 4)
DECODE_PLANES = 4

#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages) of few-row groups.
SMALL_GROUP = (1, 1, 1, 128, 8)
PROMOTED_GROUP = (2, 1, 1, 128, 6)


def grouped_specialized_tiling(typical: MatmulProblem, dialect: Dialect, dense: Mapping) -> dict:
    """The tiling of ``grouped_specialized_wgmma`` for groups like ``typical`` (the dense batched
    problem one group looks like), ``dense`` the dense rule's for it."""
    promoted = wants_promotion(typical)
    if typical.m <= 64:
        shape = SMALL_GROUP
    elif promoted and typical.m <= 128:
        shape = PROMOTED_GROUP
    else:
        return dict(dense)
    wm, wn, pm, tn, stages = shape
    behind = dict(promote_behind=True) if promoted else {}
    return preset(wm, wn, pm, tn, **store_plan(typical, dialect, wm * pm * 64, wn * tn, stages), **behind)


def grouped_decode_tiling(problem: MatmulProblem, typical: MatmulProblem) -> dict:
    """The tiling of ``grouped_quantized_decode`` for ``problem`` (grouped; ``typical``: the dense
    batched problem one group looks like). A group takes a tile per `DECODE_ROW_TILES` x 8 of its
    rows, each streaming its expert's weights again, so the tile is sized for the groups a routing
    makes, not for the typical one: 16 rows where a group's share is at most that or (masked) its
    slab is only a bound on its count (a decode batch's capacity pads it), else 32; the row tiles
    past a group's rows skip their products (global_/quantized_decode.py). The call has a cube per
    tile of every group, so 4 planes a cube, not the dense rule's 8 for one weight's few cubes.
    Measured (bench/SELECTION_NOTES.md, "Quantized experts"; H200, 8 experts 4096 -> 14336, 64
    tokens, int4 g128 / int8, graph-free device times): against one 8-row tile of 8 planes,
    contiguous skewed 207 -> 176 us, one expert holding every token 149 -> 83, balanced 157 -> 154
    (int8 152 -> 163); masked (64-row slabs) 415 -> 186, 479 -> 168."""
    few = typical.m <= 8 * DECODE_ROW_TILES[0] or problem.groups.layout == "masked"
    return {"row_tiles": DECODE_ROW_TILES[0] if few else DECODE_ROW_TILES[1], "planes": DECODE_PLANES}


def grouped_member_rules(typical) -> tuple[Rule, ...]:
    """The grouped family's conditions on its quantized members (the dense ones have none: they
    refuse quantized experts): the dense rules' conditions on the problem one group looks like
    (``typical``: algorithms/grouped.py), so that decode-sized groups stream their experts' weights
    through the decode kernel and larger ones take wgmma's register path on Hopper."""
    def on_a_group(condition):
        return lambda problem, dialect: condition(typical(problem) if problem.groups is not None else problem,
                                                  dialect)
    return (Rule("grouped_quantized_decode", "quantized experts at decode sizes (a group's rows <= 64): each "
                                             "expert's weights streamed once", on_a_group(quantized_decode_worth_it)),
            Rule("grouped_quantized_wgmma", "quantized experts of 48 rows a group or more on Hopper: wgmma with "
                                            "the weights dequantized into its register operand",
                 on_a_group(grouped_wgmma_worth_it)))


def grouped_wgmma_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """The dense rule's condition on a group (``problem``: the typical one), without its upper
    bounds: past 512 rows, and past 256 over a long K, the dense rule hands a product to the
    dequantizing pass and a dense kernel, which no grouped level has; the next grouped member is
    the dequantizing loader under mma.sync (H200, int4 experts of 1024 rows, 4096 -> 28672: 17.1
    ms, over ten times the register path's expected time). Its tiles take 256 rows a cube there
    (`default_tokens`), so any group size runs."""
    why = quantized_wgmma_worth_it(problem, dialect)
    if why is None or problem.m < MIN_M:
        return why
    return quantized_wgmma_worth_it(replace(problem, m=min(problem.m, 256)), dialect)
