"""``simple_wmma``: the simple pipeline with `WmmaTile` (the WMMA API) on the plane-partitioned
stage: the portable CUDA tensor-core path beside the inline-PTX ``simple_mma``."""
from __future__ import annotations

from ..selector.mma import wmma_tiling
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.wmma import WmmaTile
from .base import Algorithm, register


@register
class SimpleWmmaAlgorithm(Algorithm):
    name = "simple_wmma"
    selection_name = "WmmaSelection"
    tile = WmmaTile
    stage = PlanePartitionedStage

    def select(self, problem, dialect):
        return wmma_tiling(problem, dialect)


#: The WMMA algorithm's tiling: a plane selection of 16 x 16 tiles.
WmmaSelection = SimpleWmmaAlgorithm.selection_class
