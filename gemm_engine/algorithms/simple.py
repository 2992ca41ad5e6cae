"""Simple: a single-stage global matmul (load, barrier, compute, barrier) under a partitioned batch.

``simple_unit``: register tiles on a unit-partitioned stage (every backend and dtype).
``simple``: the family that takes the tensor-core variant (``simple_mma``) where it sets up and
the unit variant everywhere else.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from .accelerated import SimpleMmaAlgorithm
from .base import Algorithm, AlgorithmFamily, register


@dataclass(frozen=True)
class UnitSelection:
    """Tiling of the unit algorithms: each unit computes tile_m x tile_n of a stage_m x stage_n tile."""

    tile_m: int = 4
    tile_n: int = 4
    stage_m: int = 64
    stage_n: int = 64
    stage_k: int = 16
    dispatch: str = "row_major"


def _fit(extent: int, full: int, units: int) -> tuple[int, int]:
    """(stage, tile) along one axis: shrink the stage for small extents so fewer units idle."""
    stage = full
    while stage > units and stage // 2 >= extent:
        stage //= 2
    return stage, max(1, stage // units)


def select_unit_tiling(problem: MatmulProblem, dialect: Dialect) -> UnitSelection:
    big = problem.m >= 128 and problem.n >= 128
    if dialect.device.backend == "cuda" and problem.lhs.compute == "f32" and big:
        # 8 x 8 per thread on 128 x 128: 64 FMAs per 16 shared-memory reads, the classic SGEMM shape.
        return UnitSelection(tile_m=8, tile_n=8, stage_m=128, stage_n=128, stage_k=8)
    if dialect.device.plane_size == 1 and big:
        # CPU OpenCL (PoCL): fewer, fatter work-items measured fastest at 1024^3 f32
        # (8.7 GFLOP/s vs 4.8 for 4x4 on 64x64 with 2 cores; bench/README.md has the sweep).
        return UnitSelection(tile_m=4, tile_n=8, stage_m=32, stage_n=64, stage_k=16)
    stage_m, tile_m = _fit(problem.m, 64, 16)
    stage_n, tile_n = _fit(problem.n, 64, 16)
    return UnitSelection(tile_m=tile_m, tile_n=tile_n, stage_m=stage_m, stage_n=stage_n, stage_k=16)


@register
class SimpleUnitAlgorithm(Algorithm):
    name = "simple_unit"
    selection_class = UnitSelection

    def select(self, problem, dialect):
        return select_unit_tiling(problem, dialect)


@register
class SimpleAlgorithm(AlgorithmFamily):
    name = "simple"
    variants = (SimpleMmaAlgorithm, SimpleUnitAlgorithm)
