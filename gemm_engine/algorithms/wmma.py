"""``simple_wmma``: the simple pipeline with `WmmaTile` (the WMMA API) on the plane-partitioned
stage: the portable CUDA tensor-core path beside the inline-PTX ``simple_mma``."""
from __future__ import annotations

from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.wmma import WmmaTile
from .accelerated import select_plane_tiling
from .base import Algorithm, register


@register
class SimpleWmmaAlgorithm(Algorithm):
    name = "simple_wmma"
    selection_name = "WmmaSelection"
    tile = WmmaTile
    stage = PlanePartitionedStage

    def select(self, problem, dialect):
        # 16 x 16 tiles: half as many n tiles per plane as the 16 x 8 mma.sync tiling, same stage.
        sel = select_plane_tiling(problem, dialect, problem.precision)
        return {**sel, "tile_n": 16, "partition_n": max(1, sel.get("partition_n", 4) // 2)}


#: The WMMA algorithm's tiling: a plane selection of 16 x 16 tiles.
WmmaSelection = SimpleWmmaAlgorithm.selection_class
