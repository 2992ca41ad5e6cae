"""Tilings of the Hopper pipelined algorithms (pipelined_wgmma, split_k_wgmma): the largest
warpgroup stage whose grid still gives nine in ten multiprocessors a cube.

The measurements behind each choice: bench/SELECTION_NOTES.md, "wgmma (pipelined) tilings".
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.dialect import Dialect
from ..global_.promotion import MAX_PROMOTED_REGS, wants_promotion
from ..problem import MatmulProblem
from ..tile.wgmma import ATOM_BYTES, SWIZZLE_BYTES
from .base import distinct, tile_count

#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages), largest stage first: 256 x 128 matched
#: 128 x 256 at 4096^3 and beat it by about 8% at 8192^3.
CANDIDATES = [
    (2, 1, 2, 128, 4),     # 256 x 128: 48 KiB per slot, 193 KiB ring
    (2, 1, 1, 128, 4),     # 128 x 128
    (1, 1, 1, 128, 4),     # 64 x 128
    (1, 1, 1, 64, 4),      # 64 x 64
]
#: Where no candidate's ring fits the device's shared memory (NVIDIA's OpenCL: 48 KiB a work-group),
#: two-slot rings with no batch left pending, in row-major tile order, fastest first (f16 4096^3
#: through NVIDIA's OpenCL, nvJitLink's code, one run: one warpgroup of two 64 x 64 tiles 449
#: TFLOP/s, in the swizzled order 403; 64 x 128 394; two warpgroups of 64 x 64 391; 64 x 64 in 3
#: slots 316; bench/SELECTION_NOTES.md).
SMALL_RINGS = [
    (1, 1, 2, 64, 2),      # 128 x 64: 48 KiB
    (1, 1, 1, 128, 2),     # 64 x 128: 48 KiB
    (1, 1, 1, 64, 3),      # 64 x 64: 48 KiB
]
#: At most this K the output is staged through shared memory (tf32 stages it at every K).
STAGED_MAX_K = 512
#: At most this K the kernel is output-bound: 64 x 128 tiles on a two-slot ring, no wgmma pending.
SHORT_K = 64
#: Enough tiles: this share of the multiprocessors busy in one wave.
WAVE_SHARE = 0.9
#: From this many tiles, the swizzled order keeps neighbouring tiles' operands in L2.
SWIZZLED_MIN_TILES = 2048


def candidates(problem: MatmulProblem) -> list:
    """The tilings a problem's accumulators fit: promotion (fp8, block scales) keeps two sets, so
    at most 64 x 128 per warpgroup (global_/promotion.py)."""
    if not wants_promotion(problem):
        return CANDIDATES
    return [c for c in CANDIDATES if 2 * c[2] * c[3] // 2 <= MAX_PROMOTED_REGS]


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
    # A staged output pays where writing it is a large part of the work (a short K), and for tf32.
    staged = problem.k <= STAGED_MAX_K or problem.lhs.storage == "f32"
    if problem.k <= SHORT_K and tile_count(problem, 64, 128) >= 2 * sms:
        # Several cubes share a multiprocessor, one storing while another loads.
        return wgmma_preset(1, 1, 1, 128, 2, wgmma_pending=0, staged_output=True)
    fitting = [c for c in candidates(problem) if _fits(c, dialect)]
    more = {}
    if not fitting:
        fitting = [c for c in SMALL_RINGS if _fits(c, dialect)] or SMALL_RINGS[-1:]
        more = {"wgmma_pending": 0, "dispatch": "row_major"}
    for wm, wn, pm, tn, stages in fitting:
        sm, sn = wm * pm * 64, wn * tn
        if sm >= 2 * max(problem.m, 64) and (wm, wn, pm, tn) != CANDIDATES[-1][:4]:
            continue   # half the tile or more past M would idle
        if tile_count(problem, sm, sn) >= WAVE_SHARE * sms:
            break      # one full wave, not two waves of smaller tiles
    tiles = tile_count(problem, wm * pm * 64, wn * tn)
    return wgmma_preset(wm, wn, pm, tn, stages, staged_output=staged,
                        **{"dispatch": "swizzled" if tiles >= SWIZZLED_MIN_TILES else "row_major", **more})


def _fits(candidate: tuple, dialect: Dialect) -> bool:
    """Whether the candidate's ring (rows of 128 bytes, plus the run-time alignment's slack where
    the dialect does not align it) fits the device's shared memory."""
    wm, wn, pm, tn, stages = candidate
    slack = 0 if dialect.aligns_rings else ATOM_BYTES
    return stages * (wm * pm * 64 + wn * tn) * SWIZZLE_BYTES + slack <= dialect.device.max_shared_memory


def wgmma_tuning_space(problem: MatmulProblem, first: Mapping) -> list:
    """``first`` in its order and swizzled, every candidate with either writer, and the short-K
    two-slot tiling."""
    sk = row_k(problem)
    space = [first, {**first, "dispatch": "swizzled"}]
    for wm, wn, pm, tn, stages in candidates(problem):
        for staged in (False, True):
            space.append(wgmma_preset(wm, wn, pm, tn, stages, stage_k=sk, staged_output=staged))
    space.append(wgmma_preset(1, 1, 1, 128, 2, stage_k=sk, wgmma_pending=0, staged_output=True))
    return distinct(space)
