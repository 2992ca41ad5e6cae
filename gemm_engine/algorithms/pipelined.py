"""Pipelined tensor-core algorithm: ``mma.sync`` tiles fed by a multi-stage ``cp.async`` ring.

``pipelined_mma`` = `MmaTile` under `PlanePartitionedStage` (operands stored in shared memory in
their global layout, read by ldmatrix with or without .trans) under `PipelinedGlobalMatmul` with
`ChunkLoader`s (16-byte ``cp.async`` copies; narrower copies or a register path where the operand's
alignment does not allow 16 bytes; zero-fill at every edge). CUDA sm_80+, float16 and bfloat16
(float32 when the caller opts into tf32, as for ``simple_mma``).

Tiling rule (selector/mma.py, `select_pipelined_tiling`): warps of 64 x 64 (4 x 8 mma tiles of
16 x 8: 128 accumulator registers per lane) on 128 x 256 stages for large problems; smaller stages
as the problem shrinks, so that the grid still fills the device's multiprocessors.
"""
from __future__ import annotations

from ..global_.pipelined import PipelinedGlobalMatmul
from ..global_.read.async_loader import ChunkLoader
from ..global_.write.writers import PairedWriter
from ..selector.mma import pipelined_tuning_space, select_pipelined_tiling
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.mma import MmaTile
from .base import Algorithm, register


@register
class PipelinedMmaAlgorithm(Algorithm):
    name = "pipelined_mma"
    selection_name = "PipelinedSelection"
    tile = MmaTile
    stage = PlanePartitionedStage
    global_ = PipelinedGlobalMatmul
    lhs_loader = ChunkLoader
    rhs_loader = ChunkLoader
    writer = PairedWriter

    def select(self, problem, dialect):
        return select_pipelined_tiling(problem, dialect, problem.precision)

    def tuning_space(self, problem, dialect):
        return pipelined_tuning_space(problem, self.select(problem, dialect))


#: The tiling of the pipelined plane algorithms: a `PlaneSelection`'s knobs plus the ring depth
#: (``stages``); shared memory holds the operands as the chunk loaders copy them (global layout).
PipelinedSelection = PipelinedMmaAlgorithm.selection_class
