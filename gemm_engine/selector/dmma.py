"""Tilings of the float64 tensor-core algorithms (simple_dmma, pipelined_dmma): the DMMA instruction
a device runs best, the plane extents, and on sm_90 the stage by how full its waves are.

A plane owns ``partition_m x partition_n`` instruction tiles (16 x 8 on sm_90+, 8 x 8 before); the
candidates name a plane's extent, the same on both. A lane holds two doubles (four registers) per
8 x 8 of output, so a 64 x 32 plane (as CUTLASS's SM80 DGEMM warps) takes 128 accumulator registers.

The measurements behind each choice: bench/SELECTION_NOTES.md, "DMMA (float64) tilings".
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from .base import distinct, fit_ring, ring_bytes, tile_count
from ..tile.dmma import SMEM_PAD_F64
from .mma import pipelined_preset


def tile_shape(dialect: Dialect) -> dict:
    """The f64 instruction a device runs best: m16n8k8 on sm_90+ (the H100 issues m8n8k4 at about
    half its FP64 tensor rate), m8n8k4 before."""
    cc = dialect.device.compute_capability or (0, 0)
    return dict(tile_m=16, tile_k=8) if cc >= (9, 0) else dict(tile_m=8, tile_k=0)


def _partition(plane_m: int, plane_n: int, shape: dict) -> dict:
    return dict(partition_m=plane_m // shape["tile_m"], partition_n=plane_n // 8, **shape)


#: simple_dmma candidates (planes_m, planes_n, plane_m, plane_n), largest stage first:
#: 128 x 64, 64 x 64 (4 planes of 32 x 32), 32 x 32 (4 planes of 16 x 16).
SIMPLE_CANDIDATES = [(4, 2, 32, 32), (2, 2, 32, 32), (2, 2, 16, 16)]


def select_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    for plm, pln, wm, wn in SIMPLE_CANDIDATES:
        if tile_count(problem, plm * wm, pln * wn) >= sms:
            break
    return dict(planes_m=plm, planes_n=pln, stage_k=16, **_partition(wm, wn, tile_shape(dialect)))


#: pipelined_dmma candidates (planes_m, planes_n, plane_m, plane_n, stage_k, stages), largest stage
#: first, per architecture. sm_80 (m8n8k4): 128 x 128, 128 x 64, 64 x 64 (4 slots). sm_90 (m16n8k8):
#: 128 x 64 in 3 slots (eight planes share the FP64 tensor units no faster than four), 64 x 64, and
#: 32 x 64, the tile cuBLAS runs below 2048^3.
PIPELINED_CANDIDATES = {
    (8, 0): [(2, 4, 64, 32, 16, 3), (2, 2, 64, 32, 16, 3), (2, 2, 32, 32, 16, 4)],
    (9, 0): [(2, 2, 64, 32, 16, 3), (2, 2, 32, 32, 16, 4), (2, 2, 16, 32, 16, 4)],
}
#: Cubes of each sm_90 candidate an H100 multiprocessor holds (ptxas registers and ring bytes); 32 x 64
#: while 64 x 64 tiles number under `SM90_SMALL_WAVES` waves, else 64 x 64 where its waves are fuller
#: than 128 x 64's by `SM90_FULLER` or more.
SM90_RESIDENT = (2, 3, 4)
SM90_SMALL_WAVES, SM90_FULLER = 1.5, 0.05


def _pipelined_candidates(dialect: Dialect) -> list[tuple]:
    cc = dialect.device.compute_capability or (8, 0)
    return PIPELINED_CANDIDATES[(9, 0) if cc >= (9, 0) else (8, 0)]


def pipelined_dmma_presets(dialect: Dialect, problem: MatmulProblem | None = None) -> list[dict]:
    """The candidates as selections; on sm_90+ with carried fragments (the next slot's first
    fragments loaded under the last k tile's DMMAs), except where an operand takes 8-byte copies
    (their extra addresses beside the second fragment set spill). sm_80 keeps the plain ring."""
    shape, presets = tile_shape(dialect), []
    cc = dialect.device.compute_capability or (8, 0)
    chunks = problem is None or min(problem.lhs_align, problem.rhs_align) >= 2
    more = {"carry_fragments": True} if cc >= (9, 0) and chunks else {}
    for plm, pln, wm, wn, sk, stages in _pipelined_candidates(dialect):
        part = _partition(wm, wn, shape)
        preset = pipelined_preset(plm, pln, part.pop("partition_m"), part.pop("partition_n"), sk, stages,
                                  **part, **more)
        if problem is not None:   # the ring fitted to the device (48 KiB on NVIDIA's OpenCL driver)
            preset = _fitted(problem, preset, plm * wm, pln * wn, dialect.device.max_shared_memory, shape["tile_k"] or 4)
        presets.append(preset)
    return presets


def _fitted(problem: MatmulProblem, preset: dict, stage_m: int, stage_n: int, limit: int, tile_k: int) -> dict:
    """``preset`` as it is where its padded ring fits ``limit``; else its rows unpadded and swizzled
    (``smem_swizzle``: tile/swizzle.py's DMMA phases, as conflict-free as the padding), which keeps
    a third more of the ring in the same bytes, fitted as `fit_ring` fits (NVIDIA's OpenCL 48 KiB:
    128 x 64 x 16 in 2 slots instead of 128 x 64 x 8 in 2; bench/SELECTION_NOTES.md, "OpenCL rings
    in 48 KiB")."""
    if ring_bytes(problem, stage_m, stage_n, preset["stage_k"], preset["stages"], 8, SMEM_PAD_F64) <= limit:
        return preset
    swizzled = fit_ring(problem, {**preset, "smem_swizzle": True}, stage_m, stage_n, 8, 0, limit, tile_k)
    return swizzled or fit_ring(problem, preset, stage_m, stage_n, 8, SMEM_PAD_F64, limit, tile_k) or preset


def select_pipelined_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """sm_90: by the waves of each candidate's tiles (`SM90_RESIDENT`); other devices: the largest
    candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    presets, candidates = pipelined_dmma_presets(dialect, problem), _pipelined_candidates(dialect)
    tiles = [tile_count(problem, plm * wm, pln * wn) for plm, pln, wm, wn, _, _ in candidates]
    if dialect.device.compute_capability == (9, 0):     # the residency counts are the H100's
        if tiles[1] < SM90_SMALL_WAVES * sms:
            return presets[2]
        full = [t / (-(-t // (sms * r)) * sms * r) for t, r in zip(tiles, SM90_RESIDENT)]
        return presets[1] if full[1] >= full[0] + SM90_FULLER else presets[0]
    for preset, count in zip(presets, tiles):
        if count >= sms:
            break
    return preset


def pipelined_dmma_tuning_space(problem: MatmulProblem, dialect: Dialect, first: Mapping) -> list:
    return distinct([first] + pipelined_dmma_presets(dialect, problem))


def pipelined_dmma_yield_to(chosen: Mapping, overrides: Mapping) -> Mapping:
    """Carried fragments go with the ring and stage the rule chose: a caller who sets the stages,
    the stage's k, the tile's k or fragment buffering gets the plain ring unless they ask for
    carry_fragments too (what they set may not carry: two slots, an odd k-tile count)."""
    if "carry_fragments" not in overrides and {"stages", "stage_k", "tile_k", "fragment_buffering"} & set(overrides):
        return {k: v for k, v in chosen.items() if k != "carry_fragments"}
    return chosen
