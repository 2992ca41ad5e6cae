"""Accelerated algorithms: tensor-core (plane-scoped) tiles under a plane-partitioned stage.

``simple_mma`` is the simple pipeline (single-stage global matmul, partitioned batch) with the unit
stage and register tile swapped for `PlanePartitionedStage` and `MmaTile`. It runs on CUDA sm_80+
for float16 and bfloat16 and int8 (s8 x s8 -> s32, exact); float32 only when the caller opts into
tf32 through the selection, e.g. ``SimpleMmaAlgorithm(PlaneSelection(precision="tf32"))``, since
tf32 keeps 10 mantissa bits. Its tiling: selector/mma.py.
"""
from __future__ import annotations

from ..selector.mma import select_plane_tiling
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.mma import MmaTile
from .base import Algorithm, register


@register
class SimpleMmaAlgorithm(Algorithm):
    name = "simple_mma"
    selection_name = "PlaneSelection"
    tile = MmaTile
    stage = PlanePartitionedStage

    def select(self, problem, dialect):
        return select_plane_tiling(problem, dialect, problem.precision)


#: The tiling of the plane (tensor-core) algorithms on the simple pipeline: planes_m x planes_n
#: planes per cube, each computing partition_m x partition_n tiles of tile_m x tile_n, over stage_k
#: rows of k per stage (the stage is (planes_m * partition_m * tile_m) x (planes_n * partition_n *
#: tile_n): the ``stage_m`` / ``stage_n`` properties). ``tile_k=0`` takes the instruction's k.
PlaneSelection = SimpleMmaAlgorithm.selection_class
