"""Tilings of the mma.sync (plane) algorithms: simple_mma and double_buffering_mma (one stage of
shared memory), simple_wmma, and pipelined_mma / split_k_mma (a ring of cp.async stages).

The measurements behind each choice: bench/SELECTION_NOTES.md, "mma.sync (plane) tilings".
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.device import SASS_BUILD
from ..codegen.dialect import Dialect
from ..problem import Layout, MatmulProblem
from ..tile.swizzle import swizzle_refusal
from .base import distinct, fit_ring, tile_count


def select_plane_tiling(problem: MatmulProblem, dialect: Dialect, precision: str = "default") -> dict:
    """8 planes (2 x 4) per cube, each 64 x 32 (4 x 4 tiles of 16 x 8): a 128 x 128 stage of
    stage_k 16 (at 32 the cyclic loaders' tasks push ptxas to 255 registers and spills). An axis of
    64 or less halves the partitions along it (the cube keeps 8 planes, less of it on padding)."""
    if problem.lhs.storage == "i8":
        # int8: the instruction's k is 32; at most 4 x 2 tiles a plane (4 x 4 spills with bounds checks).
        return dict(partition_m=2 if problem.m <= 64 else 4, partition_n=2, precision=precision, stage_k=32)
    return dict(partition_m=2 if problem.m <= 64 else 4, partition_n=2 if problem.n <= 64 else 4,
                precision=precision)


def wmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """16 x 16 WMMA tiles: half as many n tiles per plane as the 16 x 8 mma.sync tiling, same stage."""
    sel = select_plane_tiling(problem, dialect, problem.precision)
    return {**sel, "tile_n": 16, "partition_n": max(1, sel.get("partition_n", 4) // 2)}


#: pipelined_mma's stages (planes_m, planes_n, partition_m, partition_n, stage_k in 16-bit elements,
#: ring slots), largest first: 128 x 256 x 64 in 3 slots was the fastest at 4096^3, 128 x 128 x 32
#: in 4 at 2048^3, the small ones at 1000^3.
PIPELINED_CANDIDATES = [
    (2, 4, 4, 8, 64, 3),     # 128 x 256, 8 warps of 64 x 64
    (2, 2, 4, 8, 32, 4),     # 128 x 128, 4 warps of 64 x 64
    (2, 2, 2, 8, 32, 4),     # 64 x 128, 4 warps of 32 x 64
    (2, 2, 2, 4, 32, 4),     # 64 x 64, 4 warps of 32 x 32
]
#: The large stage of operands that cannot take 16-byte copies: x 64 in 3 slots with 4- or 8-byte
#: copies (best at 4093^3); x 32 in 4 on the register path (x 64 needs 64 staging registers and spills).
UNALIGNED_LARGE = (2, 2, 4, 8, 64, 3)
REGISTER_PATH_LARGE = (2, 2, 4, 8, 32, 4)
#: tf32 with at most this K is output-bound: the smallest stage, the most cubes in flight.
TF32_SHORT_K = 128


def pipelined_preset(planes_m, planes_n, partition_m, partition_n, stage_k, stages, **more) -> dict:
    """A ring tiling of the plane stage, with fragment buffering (the pipelined kernels' default)."""
    return dict(planes_m=planes_m, planes_n=planes_n, partition_m=partition_m, partition_n=partition_n,
                stage_k=stage_k, stages=stages, fragment_buffering=True, **more)


def select_pipelined_tiling(problem: MatmulProblem, dialect: Dialect, precision: str = "default") -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last one
    otherwise): big stages reuse each loaded element most, small ones keep small problems parallel.
    Each candidate's ring is fitted to the device's shared memory (`fit_ring`: 48 KiB on NVIDIA's
    OpenCL driver takes fewer slots or a shorter stage_k)."""
    sms = max(1, dialect.device.compute_units)
    wide = 8 if problem.lhs.storage != "f32" else 4          # elements per 16 bytes
    candidates = list(PIPELINED_CANDIDATES)
    align = min(problem.lhs_align, problem.rhs_align)
    if align < wide:
        candidates[0] = REGISTER_PATH_LARGE if align * 16 // wide < 4 else UNALIGNED_LARGE
    if problem.lhs.storage == "f32" and problem.k <= TF32_SHORT_K:
        candidates = candidates[-1:]
    fitted = [(c, _fitted(problem, dialect, c, precision=precision)) for c in candidates]
    fitted = [(c, sel) for c, sel in fitted if sel is not None] or fitted[-1:]
    # A stage whose ring fits only with a shorter stage_k loses to a smaller stage that keeps it
    # (NVIDIA's OpenCL, 48 KiB, f16 4096^3: 128x256 at stage_k 16 0.22x cuBLAS, 128x128 at 32 0.33x;
    # bench/SELECTION_NOTES.md, "OpenCL rings in 48 KiB"): such stages only where no other fits.
    whole = [(c, sel) for c, sel in fitted if sel is None or sel["stage_k"] == _preset(problem, c)["stage_k"]]
    fitted = whole or fitted
    for (plm, pln, pm, pn, _, _), sel in fitted:
        if tile_count(problem, plm * pm * 16, pln * pn * 8) >= sms:
            break
    return sel or _preset(problem, fitted[-1][0], precision=precision)


def _preset(problem: MatmulProblem, candidate: tuple, **more) -> dict:
    plm, pln, pm, pn, sk, stages = candidate
    # Rows of the same bytes for tf32: half the k (so the ring's shared memory stays the same).
    return pipelined_preset(plm, pln, pm, pn, sk // 2 if problem.lhs.storage == "f32" else sk, stages, **more)


#: The instruction's k of each operand storage (the shortest stage_k a fitted ring may take).
_INSTRUCTION_K = {"f16_bits": 16, "bf16_bits": 16, "f32": 8, "i8": 32}


def _fitted(problem: MatmulProblem, dialect: Dialect, candidate: tuple, **more) -> dict | None:
    """The candidate's preset with its ring fitted to the device's shared memory (None: no fit).
    Where the padded ring must give up slots or k to fit and the device's kernels are compiled by
    nvJitLink (`SASS_BUILD`), its rows unpadded and swizzled instead where that keeps more slots
    (NVIDIA's OpenCL, 48 KiB, f16 4096^3: 128 x 128 x 32 in 3 swizzled slots 393 TFLOP/s against
    269 in 2 padded ones; under the driver's own compile 238 against 276: bench/SELECTION_NOTES.md,
    "OpenCL rings in 48 KiB")."""
    plm, pln, pm, pn, sk, stages = candidate
    size = problem.lhs.itemsize
    stage_m, stage_n = plm * pm * 16, pln * pn * 8
    limit, tile_k = dialect.device.max_shared_memory, _INSTRUCTION_K.get(problem.lhs.storage, 16)
    padded = fit_ring(problem, _preset(problem, candidate, **more), stage_m, stage_n, size, 16 if size == 1 else 8,
                      limit, tile_k)
    whole = _preset(problem, candidate)
    if SASS_BUILD not in dialect.device.features or (padded is not None and padded["stages"] == stages
                                                      and padded["stage_k"] == whole["stage_k"]):
        return padded
    swizzled = fit_ring(problem, _preset(problem, candidate, smem_swizzle=True, **more), stage_m, stage_n, size, 0,
                        limit, tile_k)
    if swizzled is None or any(swizzle_refusal(line * size) for line in _lines(problem, swizzled, stage_m, stage_n)):
        return padded
    # More slots at no shorter k (a longer k in as few slots measured slower: 128 x 256 x 32 in 2
    # swizzled slots 342 TFLOP/s against 128 x 128 x 32 in 3, 393).
    if padded is None or (swizzled["stages"] > padded["stages"] and swizzled["stage_k"] >= padded["stage_k"]):
        return swizzled
    return padded


def _lines(problem: MatmulProblem, sel: dict, stage_m: int, stage_n: int) -> tuple[int, int]:
    """Elements a shared-memory row of each operand holds, unpadded (as the loaders store them)."""
    k = sel["stage_k"]
    return (k if Layout(problem.lhs_layout) is Layout.ROW else stage_m,
            k if Layout(problem.rhs_layout) is Layout.COL else stage_n)


def pipelined_tuning_space(problem: MatmulProblem, first: Mapping, dialect: Dialect | None = None) -> list:
    """``first``, then ``first`` on each candidate stage (tf32: half the k, as the rule does; each
    ring fitted to ``dialect``'s device where given)."""
    presets = [_preset(problem, c) if dialect is None else _fitted(problem, dialect, c) for c in PIPELINED_CANDIDATES]
    return distinct([first] + [{**first, **sel} for sel in presets if sel is not None])
