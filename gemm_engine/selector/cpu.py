"""Tilings of the CPU path (``direct_vector``, algorithms/direct.py), and when ``auto`` takes it.

A unit's tile is ``tile_m`` rows by ``tile_n`` columns of vectors as wide as the CPU's SIMD
registers (`DeviceInfo.vector_width`: 16 floats with AVX-512); one unit per cube. The tile sizes
trade accumulator registers (``tile_m * tile_n / width`` of the 32) against loads per multiply-add:
each k step loads ``tile_n / width`` rhs vectors and ``tile_m`` lhs scalars for ``tile_m * tile_n /
width`` vector FMAs. The measurements behind the choice: bench/SELECTION_NOTES.md, "CPU path (direct_vector)".
"""
from __future__ import annotations

from typing import Mapping

from ..codegen.dialect import Dialect
from ..problem import Layout, MatmulProblem
from .base import distinct

#: (tile_m, vectors per row): the default first, then the alternatives the tuner times.
TILES = [(10, 2), (12, 2), (8, 2), (6, 4), (14, 2), (8, 3), (6, 2)]
#: k steps unrolled per iteration of the K loop.
STAGE_K = 4
#: Without a known SIMD width: AVX2's 8 floats.
DEFAULT_WIDTH = 8


def cpu_path(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """None where ``auto`` takes direct_vector: a CPU OpenCL device, a row-major rhs, operands it
    reads (floating point) and a problem of at least one tile; else why not."""
    dev = dialect.device
    if dev.backend != "opencl" or dev.vendor != "cpu":
        return "the CPU path: GPUs have their own kernels"
    if Layout(problem.rhs_layout) is not Layout.ROW:
        return "a column-major rhs is contiguous along k; the CPU tile reads it along n"
    return None


def _width(problem: MatmulProblem, dialect: Dialect) -> int:
    floats = dialect.device.vector_width
    if floats not in (4, 8, 16):     # unknown, or a device without SIMD (Oclgrind says 1): AVX2's
        floats = DEFAULT_WIDTH
    return floats // 2 if problem.lhs.compute == "f64" else floats


def _tiling(tile_m: int, vectors: int, width: int, problem: MatmulProblem) -> dict:
    """A tile of ``tile_m`` x ``vectors`` vectors, shrunk to fit a small problem (the direct global
    level needs one whole tile inside the problem)."""
    while vectors > 1 and vectors * width > problem.n:
        vectors -= 1
    tile_m = max(1, min(tile_m, problem.m))
    tile_n = vectors * width
    return dict(tile_m=tile_m, tile_n=tile_n, vector_width=width, stage_m=tile_m, stage_n=tile_n, stage_k=STAGE_K)


def select_cpu_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    tile_m, vectors = TILES[0]
    return _tiling(tile_m, vectors, _width(problem, dialect), problem)


def cpu_tuning_space(problem: MatmulProblem, dialect: Dialect, first: Mapping) -> list:
    width = _width(problem, dialect)
    return distinct([dict(first)] + [_tiling(tm, v, width, problem) for tm, v in TILES])
