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

Tiling rule (`select_wgmma_tiling`): the largest stage whose grid still gives every multiprocessor
a cube: 256 x 128 (two warpgroups of two 64 x 128 tiles, 128 accumulators per unit) in 4 stages
of 64 k for large problems, then 128 x 128, 64 x 128 and 64 x 64.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..batch.k_major import KMajorBatchMatmul
from ..global_.promotion import MAX_PROMOTED_REGS, wants_promotion
from ..global_.read.swizzled_loader import SwizzledChunkLoader
from ..global_.wgmma_pipelined import WgmmaPipelinedGlobalMatmul
from ..global_.write.writers import StagedWriter
from ..problem import MatmulProblem
from ..stage.warpgroup_partitioned import WarpgroupPartitionedStage
from ..tile.wgmma import SWIZZLE_BYTES, WgmmaTile
from .base import Algorithm, distinct, register


#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages), largest stage first.
#: Measured on the H100 (bench/results/h100_2026-11-20_wgmma.md): 256 x 128 (two warpgroups of two
#: 64 x 128 tiles) matched 128 x 256 at 4096^3 and beat it by ~8% at 8192^3.
_CANDIDATES = [
    (2, 1, 2, 128, 4),     # 256 x 128: 48 KiB per slot, 193 KiB ring
    (2, 1, 1, 128, 4),     # 128 x 128
    (1, 1, 1, 128, 4),     # 64 x 128
    (1, 1, 1, 64, 4),      # 64 x 64
]


def _candidates(problem: MatmulProblem) -> list:
    """The tilings a problem's accumulators fit: promotion (fp8, block scales) keeps two sets, so
    at most 64 x 128 per warpgroup (global_/promotion.py)."""
    if not wants_promotion(problem):
        return _CANDIDATES
    return [c for c in _CANDIDATES if 2 * c[2] * c[3] // 2 <= MAX_PROMOTED_REGS]


def row_k(problem: MatmulProblem) -> int:
    """stage_k of one 128-byte swizzled row: 64 16-bit elements, 32 tf32, 128 int8."""
    return SWIZZLE_BYTES // problem.lhs.itemsize


def wgmma_preset(warpgroups_m, warpgroups_n, partition_m, tile_n, stages, **more) -> dict:
    return dict(warpgroups_m=warpgroups_m, warpgroups_n=warpgroups_n, partition_m=partition_m,
                tile_n=tile_n, stages=stages, **more)


def select_wgmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    return {**_select_tiling(problem, dialect), "stage_k": row_k(problem)}


def _select_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    sms = max(1, dialect.device.compute_units)
    # Staging the output through shared memory pays where writing the output is a large part of the
    # work (a short K): bf16 8192 x 8192 x 64 0.147 -> 0.111 ms; at 8192^3 f16 it costs 0.91 -> 0.72x
    # cuBLAS (bench/results/h100_2026-11-21_staged_writer.txt).
    # tf32 stages it at every K: 4096^3 0.525 -> 0.467 ms with a row-major b, 0.440 -> 0.381 with a
    # column-major one (bench/results/h100_2026-11-21_tf32_first.md).
    staged = problem.k <= 512 or problem.lhs.storage == "f32"
    if problem.k <= 64 and problem.batch * -(-problem.m // 64) * -(-problem.n // 128) >= 2 * sms:
        # A short K makes the kernel output-bound: 64 x 128 tiles on a two-slot ring (no wgmma left
        # pending) let several cubes share a multiprocessor, one storing while another loads.
        # Measured on the H100 (bench/results/h100_2026-11-21_sweep_special_case_tilings_wgmma.json): bf16
        # 8192 x 8192 x 64 with bias + relu 0.088 ms against 0.111 for 256 x 128 on four slots.
        return wgmma_preset(1, 1, 1, 128, 2, wgmma_pending=0, staged_output=True)
    for wm, wn, pm, tn, stages in _candidates(problem):
        sm, sn = wm * pm * 64, wn * tn
        if sm >= 2 * max(problem.m, 64) and (wm, wn, pm, tn) != _CANDIDATES[-1][:4]:
            continue   # half the tile or more past M: idle (measured: 256 x 128^3 f16 batched,
                       # 128 x 128 tiles 0.0175 ms against 0.0196 for 256 x 128)
        # One full wave is enough (9 in 10 multiprocessors busy): 2048^3 runs best on 128 tiles
        # of 256 x 128 and 1000^3 on 128 of 64 x 128, not on two waves of smaller tiles (the tuner's
        # and bench/probe_small_problems.py's choices, bench/results/h100_2026-11-21_*).
        if problem.batch * -(-problem.m // sm) * -(-problem.n // sn) >= 0.9 * sms:
            break
    # Large outputs: the swizzled order keeps neighbouring tiles' operands in L2. The tuner picked it
    # at 8192^3 and 8192 x 12288 x 4096 (2-7% faster), row-major at 4096^3 and 8192 x 4096 (1024
    # tiles or fewer): bench/results/h100_2026-11-21_suite_full_tuned_float16_bfloat16.md.
    tiles = problem.batch * -(-problem.m // (wm * pm * 64)) * -(-problem.n // (wn * tn))
    return wgmma_preset(wm, wn, pm, tn, stages, staged_output=staged,
                        dispatch="swizzled" if tiles >= 2048 else "row_major")


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
        # Every tiling of the heuristic's list with either writer, the short-K two-slot tiling,
        # and the chosen tiling in swizzled order (L2 reuse on large outputs).
        first, sk = self.select(problem, dialect), row_k(problem)
        space = [first, {**first, "dispatch": "swizzled"}]
        for wm, wn, pm, tn, stages in _candidates(problem):
            for staged in (False, True):
                space.append(wgmma_preset(wm, wn, pm, tn, stages, stage_k=sk, staged_output=staged))
        space.append(wgmma_preset(1, 1, 1, 128, 2, stage_k=sk, wgmma_pending=0, staged_output=True))
        return distinct(space)


#: The tiling of the Hopper pipeline: warpgroups_m x warpgroups_n warpgroups per cube, each
#: computing partition_m tiles of 64 x tile_n (stacked along m), over stage_k k per slot of a
#: ``stages``-deep ring; ``wgmma_pending`` batches may still run when the next step starts;
#: ``staged_output`` stores through shared memory (`global_.writers.StagedWriter`).
WgmmaSelection = PipelinedWgmmaAlgorithm.selection_class
