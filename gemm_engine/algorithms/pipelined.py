"""Pipelined tensor-core algorithm: ``mma.sync`` tiles fed by a multi-stage ``cp.async`` ring.

``pipelined_mma`` = `MmaTile` under `PlanePartitionedStage` (operands stored in shared memory in
their global layout, read by ldmatrix with or without .trans) under `PipelinedGlobalMatmul` with
`ChunkLoader`s (16-byte ``cp.async`` copies; narrower copies or a register path where the operand's
alignment does not allow 16 bytes; zero-fill at every edge). CUDA sm_80+, float16 and bfloat16
(float32 when the caller opts into tf32, as for ``simple_mma``).

Tiling rule (`select_pipelined_tiling`): warps of 64 x 64 (4 x 8 mma tiles of 16 x 8: 128
accumulator registers per lane) on 128 x 256 stages for large problems; smaller stages as the
problem shrinks, so that the grid still fills the device's multiprocessors.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.read.async_loader import ChunkLoader
from ..global_.pipelined import PipelinedGlobalMatmul
from ..global_.write.writers import PairedWriter
from ..problem import MatmulProblem
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.mma import MmaTile
from .base import Algorithm, distinct, register


#: (planes_m, planes_n, partition_m, partition_n, stage_k in 16-bit elements, stages), largest
#: stage first. Measured on the H100 (bench/results/h100_2026-11-20_pipelined_mma.md): 128 x 256 x 64 in 3
#: stages was the fastest at 4096^3, 128 x 128 x 32 in 4 stages at 2048^3, the small ones at 1000^3.
_CANDIDATES = [
    (2, 4, 4, 8, 64, 3),     # 128 x 256, 8 warps of 64 x 64
    (2, 2, 4, 8, 32, 4),     # 128 x 128, 4 warps of 64 x 64
    (2, 2, 2, 8, 32, 4),     # 64 x 128, 4 warps of 32 x 64
    (2, 2, 2, 4, 32, 4),     # 64 x 64, 4 warps of 32 x 32
]
#: Operands that cannot take 16-byte copies: 128 x 128 stages. With 4- or 8-byte copies, x 64 in 3
#: stages (measured best at 4093^3). The register path (half precision on an odd leading dimension)
#: stages each chunk in 4 registers per task: x 64 would need 64 of them and spills, x 32 needs 32.
_UNALIGNED_LARGE = (2, 2, 4, 8, 64, 3)
_REGISTER_PATH_LARGE = (2, 2, 4, 8, 32, 4)


def pipelined_preset(planes_m, planes_n, partition_m, partition_n, stage_k, stages, **more) -> dict:
    """A ring tiling of the plane stage, with fragment buffering (the pipelined kernels' default)."""
    return dict(planes_m=planes_m, planes_n=planes_n, partition_m=partition_m, partition_n=partition_n,
                stage_k=stage_k, stages=stages, fragment_buffering=True, **more)


def select_pipelined_tiling(problem: MatmulProblem, dialect: Dialect, precision: str = "default") -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last one
    otherwise): big stages reuse each loaded element most, small ones keep small problems parallel."""
    sms = max(1, dialect.device.compute_units)
    wide = 8 if problem.lhs.storage != "f32" else 4          # elements per 16 bytes
    candidates = list(_CANDIDATES)
    align = min(problem.lhs_align, problem.rhs_align)
    if align < wide:
        candidates[0] = _REGISTER_PATH_LARGE if align * 16 // wide < 4 else _UNALIGNED_LARGE
    if problem.lhs.storage == "f32" and problem.k <= 128:
        # tf32 with a short K is output-bound: the 64 x 64 stage, with the most cubes in flight,
        # was the tuner's choice at 8192 x 8192 x 64 (0.23 ms against 0.31 for 128 x 256) and at
        # 256 x 128^3 (bench/results/h100_2026-11-21_suite_full_tuned_float32_tf32.md).
        candidates = candidates[-1:]
    for plm, pln, pm, pn, sk, stages in candidates:
        sm, sn = plm * pm * 16, pln * pn * 8
        cubes = problem.batch * -(-problem.m // sm) * -(-problem.n // sn)
        if cubes >= sms:
            break
    # Rows of the same bytes for tf32: half the k (so the ring's shared memory stays the same).
    stage_k = sk // 2 if problem.lhs.storage == "f32" else sk
    return pipelined_preset(plm, pln, pm, pn, stage_k, stages, precision=precision)


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
        first = self.select(problem, dialect)
        halve = problem.lhs.storage == "f32"      # tf32: half the k, as select does
        return distinct([first] + [
            {**first, **pipelined_preset(plm, pln, pm, pn, sk // 2 if halve else sk, stages)}
            for plm, pln, pm, pn, sk, stages in _CANDIDATES])


#: The tiling of the pipelined plane algorithms: a `PlaneSelection`'s knobs plus the ring depth
#: (``stages``); shared memory holds the operands as the chunk loaders copy them (global layout).
PipelinedSelection = PipelinedMmaAlgorithm.selection_class
