"""Pipelined Hopper algorithm: warpgroup ``wgmma`` tiles fed by a ring of swizzled ``cp.async`` stages.

``pipelined_wgmma`` = `WgmmaTile` (64 x tile_n x 16 per warpgroup, operands read from shared memory
through descriptors) under `WarpgroupPartitionedStage` under `WgmmaPipelinedGlobalMatmul` with
`SwizzledChunkLoader`s, under the K-major batch (the partitioned one, plus a transposing pass where
tf32 needs it). CUDA sm_90a only (the H100 / H200), float16 and bfloat16 with float32 accumulation,
any layout (a column-major lhs or row-major rhs sets the instruction's transpose bit), any shape
(zero-filled edges), any alignment (odd leading dimensions take the slower register path); float32
with ``precision="tf32"`` too, on stages of 32 k (one 128-byte row), its operands transposed to
K-major first where they are not (`batch.k_major`). Everything else is refused with a SetupError,
so callers can fall back to ``pipelined_mma``.

Tiling rule (selector/wgmma.py, `select_wgmma_tiling`): the largest stage whose grid still gives every multiprocessor
a cube: 256 x 128 (two warpgroups of two 64 x 128 tiles, 128 accumulators per unit) in 4 stages
of 64 k for large problems, then 128 x 128, 64 x 128 and 64 x 64.
"""
from __future__ import annotations

from ..batch.k_major import KMajorBatchMatmul
from ..global_.read.swizzled_loader import SwizzledChunkLoader
from ..global_.wgmma_pipelined import WgmmaPipelinedGlobalMatmul
from ..global_.write.writers import StagedWriter
from ..selector.wgmma import select_wgmma_tiling, wgmma_tuning_space
from ..stage.warpgroup_partitioned import WarpgroupPartitionedStage
from ..tile.wgmma import WgmmaTile
from .base import Algorithm, register


@register
class PipelinedWgmmaAlgorithm(Algorithm):
    name = "pipelined_wgmma"
    selection_name = "WgmmaSelection"
    #: The CUDA target its kernels need (wgmma is sm_90a-only PTX); compile checks use it.
    min_arch = "sm_90a"
    tile = WgmmaTile
    stage = WarpgroupPartitionedStage
    global_ = WgmmaPipelinedGlobalMatmul
    lhs_loader = SwizzledChunkLoader
    rhs_loader = SwizzledChunkLoader
    writer = StagedWriter
    batch = KMajorBatchMatmul

    def select(self, problem, dialect):
        return select_wgmma_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return wgmma_tuning_space(problem, self.select(problem, dialect))


#: The tiling of the Hopper pipeline: warpgroups_m x warpgroups_n warpgroups per cube, each
#: computing partition_m tiles of 64 x tile_n (stacked along m), over stage_k k per slot of a
#: ``stages``-deep ring; ``wgmma_pending`` batches may still run when the next step starts;
#: ``staged_output`` stores through shared memory (`global_.writers.StagedWriter`).
WgmmaSelection = PipelinedWgmmaAlgorithm.selection_class
