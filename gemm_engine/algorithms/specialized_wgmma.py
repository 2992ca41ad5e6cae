"""Hopper Specialized algorithm: TMA producer, mbarrier ring, warp-specialized wgmma consumers,
persistent cubes.

``specialized_wgmma`` = `WgmmaTile` (64 x tile_n x 16 per consumer warpgroup) under
`WarpgroupPartitionedStage` under `TmaSpecializedGlobalMatmul` (one producer warpgroup issuing TMA
copies through `TmaLoader`s into a ring of mbarrier-guarded slots; ``setmaxnreg`` moves registers
from it to the consumers), `TmaStoreWriter` (each output tile staged in shared memory and stored by
TMA while the next one computes; direct paired stores where the call's output is not 16-byte
aligned), under `TmaKMajorBatchMatmul` (one cube per multiprocessor looping over tiles; tensor maps
encoded per call; an operand TMA cannot address, or one the tile reads only K-major in the other
layout, copied first into a K-major workspace). CUDA sm_90a: float16 / bfloat16 with float32
accumulation, fp8 and int8 (promoted / exact), every layout (16-bit: column-major lhs / row-major
rhs through wgmma's transpose bits), every shape (TMA zero-fills the edges).

Its tiling (selector/specialized_wgmma.py): the cooperative 128 x 256 tile for large outputs,
128 x 128 or 64 x 128 for fewer tiles, 192 x 128 for promoted (fp8, block-scaled) ones; the output
staged in as many column parts as leave room for the ring; clusters of two cubes along M on long
16-bit K; a last wave of at most half the device split along K (``split_tail``).
"""
from __future__ import annotations

from typing import Mapping

from ..batch.tma_k_major import TmaKMajorBatchMatmul
from ..global_.read.tma_loader import TmaLoader
from ..global_.tma_specialized import TmaSpecializedGlobalMatmul
from ..global_.write.tma_store_writer import TmaStoreWriter
from ..selector.specialized_wgmma import (select_specialized_tiling, specialized_tuning_space,
                                          specialized_yield_to, store_plan)
from ..stage.warpgroup_partitioned import WarpgroupPartitionedStage
from ..tile.wgmma import WgmmaTile
from .base import Algorithm, register


#: Knobs whose naming takes short K's ping-pong tile out of the rule's choice: the tile's own, and the
#: split tail and clusters ping-pong does not run with.
_TILE_KNOBS = {"schedule", "warpgroups_m", "warpgroups_n", "partition_m", "tile_n", "split_tail", "cluster_m"}
#: A caller naming the tile's shape and not the output's staging gets the staging (and, unless named,
#: the ring's slots) fitted to that tile (`store_plan`), not the rule's tile's (which may not fit it).
SHAPE_KNOBS, STAGING_KNOBS = {"warpgroups_m", "warpgroups_n", "partition_m", "tile_n"}, {"tma_store", "store_parts"}


def named_tile(chosen: Mapping, overrides) -> dict | None:
    """The rule's ``chosen`` with the caller's ``overrides`` where they name the tile's shape and
    not the output's staging (`SHAPE_KNOBS`: the staging and slots are then to be fitted to it), else None."""
    asked = set(overrides or ())
    return {**chosen, **overrides} if SHAPE_KNOBS & asked and not STAGING_KNOBS & asked else None


def fit_named_tile(chosen: dict, overrides, problem, dialect) -> dict:
    """``chosen`` with the output's staging (and the ring's slots, unless named) fitted to the tile the
    caller's ``overrides`` name (`named_tile`; as it was where they name none)."""
    shape = named_tile(chosen, overrides)
    if shape is None:
        return chosen
    groups = 2 if shape.get("schedule") == "pingpong" else 1
    return {**chosen, **store_plan(problem, dialect, 64 * shape["warpgroups_m"] * shape["partition_m"],
                                   shape["warpgroups_n"] * shape["tile_n"], shape["stages"], groups)}


@register
class SpecializedWgmmaAlgorithm(Algorithm):
    name = "specialized_wgmma"
    selection_name = "SpecializedWgmmaSelection"
    min_arch = "sm_90a"
    tile = WgmmaTile
    stage = WarpgroupPartitionedStage
    global_ = TmaSpecializedGlobalMatmul
    lhs_loader = TmaLoader
    rhs_loader = TmaLoader
    writer = TmaStoreWriter
    batch = TmaKMajorBatchMatmul

    #: The rule's choices measured on plain dense products only (selector/specialized_wgmma.py
    #: `select_specialized_tiling`); the grouped variants' tilings were measured without them.
    dense_rules = True

    def select(self, problem, dialect):
        # A caller naming the tile (its warpgroups, rows, columns, a cooperative schedule, a split
        # tail or clusters) gets the cooperative rule's choice to override, not short K's ping-pong.
        named = _TILE_KNOBS & set(self.overrides or ())
        if (self.overrides or {}).get("schedule") == "pingpong":
            named -= {"schedule"}
        chosen = select_specialized_tiling(problem, dialect, self.dense_rules, short_k=not named)
        return fit_named_tile(chosen, self.overrides, problem, dialect)

    def yield_to(self, chosen, overrides):
        return specialized_yield_to(chosen, overrides)

    def tuning_space(self, problem, dialect):
        return specialized_tuning_space(problem, dialect, self.select(problem, dialect))


#: The tiling of the Hopper Specialized pipeline: consumer warpgroups (warpgroups_m x warpgroups_n,
#: each partition_m tiles of 64 x tile_n), a ``stages``-slot ring, the order of a cube's tiles.
SpecializedWgmmaSelection = SpecializedWgmmaAlgorithm.selection_class
