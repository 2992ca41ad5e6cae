"""Simple: a single-stage global matmul (load, barrier, compute, barrier) under a partitioned batch.

``simple_unit``: register tiles on a unit-partitioned stage (every backend and dtype).
``simple``: the family that takes the tensor-core variant (``simple_mma``) where it sets up and
the unit variant everywhere else.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.read.vector_loader import VectorLoader
from ..problem import MatmulProblem
from .accelerated import SimpleMmaAlgorithm
from .base import Algorithm, AlgorithmFamily, distinct, register


def _fit(extent: int, full: int, units: int) -> tuple[int, int]:
    """(stage, tile) along one axis: shrink the stage for small extents so fewer units idle."""
    stage = full
    while stage > units and stage // 2 >= extent:
        stage //= 2
    return stage, max(1, stage // units)


def _cubes(problem: MatmulProblem, stage_m: int, stage_n: int) -> int:
    return problem.batch * -(-problem.m // stage_m) * -(-problem.n // stage_n)


def sgemm_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The CUDA float32 register-FMA tiling: 8 x 8 outputs per unit as 2 x 2 strided 4 x 4 tiles
    (64 FMAs per four 16-byte shared reads, conflict-free), float4 global loads where aligned.

    Measured on the H100 (bench/results/h100_2026-11-20_sgemm.md): 128 x 64 x 16 stages of
    128 units beat 128 x 128 x 8 of 256 at 4096^3 (0.91 vs 0.85 x cuBLAS) and 4093^3 (0.62 vs
    0.52 with branchy loads); when they give fewer than two cubes per multiprocessor (1024^2 makes 128 on 132 SMs)
    64 x 64 x 16 stages of 64 units (256 cubes) keep every multiprocessor busy (0.72 at 1024^3)."""
    sms = max(1, dialect.device.compute_units)
    if min(problem.lhs_align, problem.rhs_align) < 4 and _cubes(problem, 128, 128) >= 2 * sms:
        # Scalar reads (an unaligned operand): 128 x 64 x 16 would give each of its 128 units 24
        # element loads per stage, all in flight at once (the loader has no branches), and ptxas
        # spills (12 to 840 bytes); 256 units over 128 x 128 x 16 have 16 each. Measured at
        # 4093^3: 0.61 x cuBLAS (128 x 128 x 8: 0.50, 128 x 64 x 16: 0.36).
        stage_m, stage_n, stage_k = 128, 128, 16
    elif _cubes(problem, 128, 64) >= 2 * sms:
        stage_m, stage_n, stage_k = 128, 64, 16
    else:
        stage_m, stage_n, stage_k = 64, 64, 16
    return dict(tile_m=4, tile_n=4, stage_m=stage_m, stage_n=stage_n, stage_k=stage_k,
                         partition_m=2, partition_n=2, partition="strided", vector_width=4)


def select_unit_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    big = problem.m >= 128 and problem.n >= 128
    if dialect.device.backend == "cuda" and problem.lhs.compute == "f32" and big:
        return sgemm_tiling(problem, dialect)
    if dialect.device.plane_size == 1 and big:
        # CPU OpenCL (PoCL): fewer, fatter work-items measured fastest at 1024^3 f32
        # (8.7 GFLOP/s vs 4.8 for 4x4 on 64x64 with 2 cores; the sweep's table was not kept).
        return dict(tile_m=4, tile_n=8, stage_m=32, stage_n=64, stage_k=16, vector_width=4)
    stage_m, tile_m = _fit(problem.m, 64, 16)
    stage_n, tile_n = _fit(problem.n, 64, 16)
    return dict(tile_m=tile_m, tile_n=tile_n, stage_m=stage_m, stage_n=stage_n, stage_k=16,
                         vector_width=4)


@register
class SimpleUnitAlgorithm(Algorithm):
    name = "simple_unit"
    selection_name = "UnitSelection"
    # 16-byte global reads where the selection's vector_width and the operands' alignment allow,
    # the cyclic loader's scalar reads otherwise.
    lhs_loader = VectorLoader
    rhs_loader = VectorLoader

    def select(self, problem, dialect):
        return select_unit_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        # The three SGEMM stages of sgemm_tiling, the CPU tiling and the plain 64 x 64 one: each
        # was the best somewhere in the sweeps behind select_unit_tiling.
        first = self.select(problem, dialect)
        sgemm = dict(tile_m=4, tile_n=4, partition_m=2, partition_n=2, partition="strided", vector_width=4)
        return distinct([first] + [{**sgemm, "stage_m": sm, "stage_n": sn, "stage_k": 16}
                                   for sm, sn in ((128, 128), (128, 64), (64, 64))] + [
            dict(tile_m=4, tile_n=8, stage_m=32, stage_n=64, stage_k=16, vector_width=4),
            dict(tile_m=4, tile_n=4, stage_m=64, stage_n=64, stage_k=16, vector_width=4)])


#: The tiling of the register-tile algorithms (simple_unit, double_buffering_unit, ordered): the
#: knobs of the register tile, the unit-partitioned stage, the vector loaders and the batch level.
UnitSelection = SimpleUnitAlgorithm.selection_class


@register
class SimpleAlgorithm(AlgorithmFamily):
    name = "simple"
    variants = (SimpleMmaAlgorithm, SimpleUnitAlgorithm)
