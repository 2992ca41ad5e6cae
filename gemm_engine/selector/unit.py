"""Tilings of the register-FMA (unit) algorithms: simple_unit, double_buffering_unit, split_k_unit,
specialized_unit and ordered_unit, and the alternatives the tuner times for them.

The measurements behind each choice: bench/SELECTION_NOTES.md, "Register FMA (unit) tilings".
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from .base import distinct, tile_count

#: The SGEMM tile: 8 x 8 outputs per unit as 2 x 2 strided 4 x 4 tiles, float4 global loads.
SGEMM_TILE = dict(tile_m=4, tile_n=4, partition_m=2, partition_n=2, partition="strided", vector_width=4)
#: CPU OpenCL (a plane of one work-item): fewer, fatter work-items on large problems.
CPU_TILING = dict(tile_m=4, tile_n=8, stage_m=32, stage_n=64, stage_k=16, vector_width=4)
#: The plain 64 x 64 x 16 stage of 4 x 4 tiles (16 x 16 units).
PLAIN_TILING = dict(tile_m=4, tile_n=4, stage_m=64, stage_n=64, stage_k=16, vector_width=4)


def _fit(extent: int, full: int, units: int) -> tuple[int, int]:
    """(stage, tile) along one axis: shrink the stage for small extents so fewer units idle."""
    stage = full
    while stage > units and stage // 2 >= extent:
        stage //= 2
    return stage, max(1, stage // units)


def sgemm_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The CUDA float32 tiling: 128 x 64 x 16 stages of 128 units where they give two cubes per
    multiprocessor, 64 x 64 x 16 where they do not; 128 x 128 x 16 for scalar (unaligned) reads."""
    sms = max(1, dialect.device.compute_units)
    if min(problem.lhs_align, problem.rhs_align) < 4 and tile_count(problem, 128, 128) >= 2 * sms:
        # Scalar reads: 128 x 64 x 16 holds 24 element loads per unit in flight and spills.
        stage_m, stage_n, stage_k = 128, 128, 16
    elif tile_count(problem, 128, 64) >= 2 * sms:
        stage_m, stage_n, stage_k = 128, 64, 16
    else:
        stage_m, stage_n, stage_k = 64, 64, 16
    return dict(SGEMM_TILE, stage_m=stage_m, stage_n=stage_n, stage_k=stage_k)


def select_unit_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """simple_unit's tiling (and its split-K and double-buffering variants')."""
    big = problem.m >= 128 and problem.n >= 128
    if dialect.device.backend == "cuda" and problem.lhs.compute == "f32" and big:
        return sgemm_tiling(problem, dialect)
    if dialect.device.plane_size == 1 and big:
        return dict(CPU_TILING)
    stage_m, tile_m = _fit(problem.m, 64, 16)
    stage_n, tile_n = _fit(problem.n, 64, 16)
    if problem.epilogue.paired and tile_n % 2:
        # A gated epilogue pairs columns 2j and 2j + 1 in one unit (global_/write/pairs.py).
        stage_n, tile_n = 32, 2
    return dict(tile_m=tile_m, tile_n=tile_n, stage_m=stage_m, stage_n=stage_n, stage_k=16, vector_width=4)


def unit_tuning_space(first: Mapping) -> list:
    """``first`` (the algorithm's own choice), then each tiling that was the best somewhere in the
    sweeps behind `select_unit_tiling`: the three SGEMM stages, the CPU tiling and the plain 64 x 64."""
    return distinct([first] + [
        dict(SGEMM_TILE, stage_m=sm, stage_n=sn, stage_k=16) for sm, sn in ((128, 128), (128, 64), (64, 64))
    ] + [dict(CPU_TILING), dict(PLAIN_TILING)])


def specialized_unit_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """simple_unit's tiling with stage_k at most 8 on stages of 128 x 128 and more: the load-only
    units (half as many) hold every load of a stage, and at 16 ptxas spills under 384 units' cap."""
    sel = select_unit_tiling(problem, dialect)
    if sel["stage_m"] * sel["stage_n"] >= 128 * 128 and sel["stage_k"] > 8:
        sel["stage_k"] = 8
    return sel


#: The lhs values an ordered unit holds in registers (stage_k x tile_m): stage_k shrinks to keep it.
ORDERED_LHS_REGS = 64


def ordered_unit_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """simple_unit's outputs per unit as one contiguous tile (partition 1: the ordered stage holds one
    tile's lhs rows per unit), stage_k cut so its lhs registers stay at `ORDERED_LHS_REGS`."""
    sel = select_unit_tiling(problem, dialect)
    tile_m = sel["tile_m"] * sel.get("partition_m", 1)
    return {**sel, "tile_m": tile_m, "tile_n": sel["tile_n"] * sel.get("partition_n", 1), "partition_m": 1,
            "partition_n": 1, "partition": "contiguous",
            "stage_k": max(1, min(sel["stage_k"], ORDERED_LHS_REGS // tile_m))}
