"""Accelerated algorithms: tensor-core (plane-scoped) tiles under a plane-partitioned stage.

``simple_mma`` is the simple pipeline (single-stage global matmul, partitioned batch) with the unit
stage and register tile swapped for `PlanePartitionedStage` and `MmaTile`. It runs on CUDA sm_80+
for float16 and bfloat16 and int8 (s8 x s8 -> s32, exact); float32 only when the caller opts into
tf32 through the selection, e.g. ``SimpleMmaAlgorithm(PlaneSelection(precision="tf32"))``, since
tf32 keeps 10 mantissa bits.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.mma import MmaTile
from .base import Algorithm, register


def select_plane_tiling(problem: MatmulProblem, dialect: Dialect, precision: str = "default") -> dict:
    """8 planes (2 x 4) per cube, each 64 x 32 (4 x 4 tiles of 16 x 8): 16 mma.sync per 4 + 4
    fragment loads, a 128 x 128 stage. An axis of 64 or less halves the partitions along it (the
    cube stays at 8 planes, less of it computes padding).

    stage_k is 16, not 32: the mma partition takes about 128 registers per lane, and the cyclic
    loaders' one-element tasks (16 per unit at stage_k=16, 32 at 32) take 50 to 130 more; at 32,
    ptxas reaches its 255-register cap and spills on shapes that need bounds checks.
    """
    if problem.lhs.storage == "i8":
        # int8: the instruction's k is 32 (16 bytes of k per row, as f16 at stage_k 16), and at
        # most 4 x 2 tiles per plane: its fragments are read byte by byte, and with 4 x 4 ptxas
        # reaches 255 registers and spills on shapes that need bounds checks (sm_80, -Xptxas -v).
        return dict(partition_m=2 if problem.m <= 64 else 4, partition_n=2, precision=precision, stage_k=32)
    return dict(partition_m=2 if problem.m <= 64 else 4, partition_n=2 if problem.n <= 64 else 4,
                precision=precision)


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
