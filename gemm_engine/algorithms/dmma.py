"""Double-precision tensor-core algorithms: the DMMA tile (``mma.sync`` m8n8k4 f64) under the plane stage.

* ``simple_dmma``: the simple pipeline (single-stage global matmul, cyclic loaders, shared memory
  k-major) with `PlanePartitionedStage` and `DmmaTile`;
* ``pipelined_dmma``: the same stage and tile under `PipelinedGlobalMatmul` (a ring of ``cp.async``
  stages; `ChunkLoader` moves 16-byte chunks of two doubles, or 8-byte copies where an operand is
  only 8-byte aligned), shared memory in the operands' global layout.

Both run float64 only, on CUDA sm_80+ (FP64 tensor cores: on the H100 about twice the FP64 FMA
rate); everything else is refused with a SetupError. Neither is in the ``auto`` / ``simple``
families yet: where DMMA beats register FMA is to be measured first.

Tiling: a plane owns ``partition_m x partition_n`` tiles of 8 x 8. A lane holds two doubles (four
registers) per tile and one double per fragment, so a 64 x 32 plane (8 x 4 tiles, as CUTLASS's
SM80 DGEMM warps) takes 128 accumulator registers and reads 12 fragments (24 shared-memory
wavefronts) per 32 DMMAs; a 32 x 32 plane (4 x 4) takes 64 and reads 8 per 16.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.async_loader import ChunkLoader
from ..global_.pipelined import PipelinedGlobalMatmul
from ..problem import MatmulProblem
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.dmma import DmmaTile
from .base import Algorithm, distinct, register
from .pipelined import pipelined_preset


def _cubes(problem: MatmulProblem, stage_m: int, stage_n: int) -> int:
    return problem.batch * -(-problem.m // stage_m) * -(-problem.n // stage_n)


#: simple_dmma candidates (planes_m, planes_n, partition_m, partition_n), largest stage first:
#: 128 x 64, 64 x 64 (4 planes of 32 x 32), 32 x 32 (4 planes of 16 x 16).
_SIMPLE_CANDIDATES = [(4, 2, 4, 4), (2, 2, 4, 4), (2, 2, 2, 2)]


def select_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    for plm, pln, pm, pn in _SIMPLE_CANDIDATES:
        if _cubes(problem, plm * pm * 8, pln * pn * 8) >= sms:
            break
    return dict(planes_m=plm, planes_n=pln, partition_m=pm, partition_n=pn, stage_k=16)


#: pipelined_dmma candidates (planes_m, planes_n, partition_m, partition_n, stage_k, stages),
#: largest stage first: 128 x 128 (8 planes of 64 x 32), 128 x 64 (4 planes of 64 x 32), 64 x 64
#: (4 planes of 32 x 32, 4 slots). Unmeasured starting points (see bench/sweep_dmma_tilings.py).
_PIPELINED_CANDIDATES = [
    (2, 4, 8, 4, 16, 3),
    (2, 2, 8, 4, 16, 3),
    (2, 2, 4, 4, 16, 4),
]


def select_pipelined_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    for plm, pln, pm, pn, sk, stages in _PIPELINED_CANDIDATES:
        if _cubes(problem, plm * pm * 8, pln * pn * 8) >= sms:
            break
    return pipelined_preset(plm, pln, pm, pn, sk, stages)


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

    def select(self, problem, dialect):
        return select_pipelined_dmma_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return distinct([self.select(problem, dialect)] + [
            pipelined_preset(plm, pln, pm, pn, sk, stages) for plm, pln, pm, pn, sk, stages in _PIPELINED_CANDIDATES])


#: The DMMA algorithms' tilings: plane selections of the 8 x 8 x 4 float64 tile (plus the ring
#: depth for the pipelined one).
DmmaSelection = SimpleDmmaAlgorithm.selection_class
PipelinedDmmaSelection = PipelinedDmmaAlgorithm.selection_class
