"""Double-precision tensor-core algorithms: the DMMA tile (f64 ``mma.sync``: m16n8k8 on sm_90+,
m8n8k4 before) under the plane stage.

* ``simple_dmma``: the simple pipeline (single-stage global matmul, cyclic loaders, shared memory
  k-major) with `PlanePartitionedStage` and `DmmaTile`;
* ``pipelined_dmma``: the same stage and tile under `PipelinedGlobalMatmul` (a ring of ``cp.async``
  stages; `ChunkLoader` moves 16-byte chunks of two doubles, or 8-byte copies where an operand is
  only 8-byte aligned), shared memory in the operands' global layout; results leave as 16-byte
  pairs (`PairedWriter`) where the output's alignment allows.

Both run float64 only, on CUDA sm_80+ (FP64 tensor cores: on the H100 about twice the FP64 FMA
rate); everything else is refused with a SetupError. ``auto`` takes ``pipelined_dmma`` for float64
on sm_80+ (selector/rules.py). Their tilings: selector/dmma.py.
"""
from __future__ import annotations

from ..global_.pipelined import PipelinedGlobalMatmul
from ..global_.read.async_loader import ChunkLoader
from ..global_.write.writers import PairedWriter
from ..selector.dmma import (pipelined_dmma_tuning_space, pipelined_dmma_yield_to, select_dmma_tiling,
                             select_pipelined_dmma_tiling)
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.dmma import DmmaTile
from .base import Algorithm, register


@register
class SimpleDmmaAlgorithm(Algorithm):
    name = "simple_dmma"
    selection_name = "DmmaSelection"
    tile = DmmaTile
    stage = PlanePartitionedStage

    def select(self, problem, dialect):
        return select_dmma_tiling(problem, dialect)


@register
class PipelinedDmmaAlgorithm(Algorithm):
    name = "pipelined_dmma"
    selection_name = "PipelinedDmmaSelection"
    tile = DmmaTile
    stage = PlanePartitionedStage
    global_ = PipelinedGlobalMatmul
    lhs_loader = ChunkLoader
    rhs_loader = ChunkLoader
    writer = PairedWriter

    def select(self, problem, dialect):
        return select_pipelined_dmma_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return pipelined_dmma_tuning_space(problem, dialect, self.select(problem, dialect))

    def yield_to(self, chosen, overrides):
        return pipelined_dmma_yield_to(chosen, overrides)


#: The DMMA algorithms' tilings: plane selections of the 8 x 8 x 4 float64 tile (plus the ring
#: depth for the pipelined one).
DmmaSelection = SimpleDmmaAlgorithm.selection_class
PipelinedDmmaSelection = PipelinedDmmaAlgorithm.selection_class
