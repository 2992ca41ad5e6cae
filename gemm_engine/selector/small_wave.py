"""16-bit products too small for the specialized kernel's usual bounds whose 64 x 128 tiles fill a
wave: there it runs them faster than pipelined_wgmma (H200, CUDA-graph replay, us, pipelined /
specialized 64 x 128; bench/SELECTION_NOTES.md, "One wave of 64 x 128 tiles"): f16 1000^3 11.8 /
8.2, 1024^3 7.6 / 5.8, bf16 768^3 6.9 / 4.8, 700 x 1304 x 904 12.0 / 8.6, 256 x 4096 x 1024 (b
column-major) 8.4 / 5.7; level with fewer tiles (512^3 4.1 / 4.1, 640 x 640 x 2560 9.7 / 9.7) and
slower past a wave (2000 x 1000 x 1000 in 64 x 128 tiles 17.1 against 13.8). Where the rhs rows are
not whole 32-byte sectors two cubes of a cluster share each rhs slot (f16 1000^3 8.1 against 9.8,
700 x 1304 x 904 8.6 against 9.4; aligned rows lose with it: 1024^3 6.5 against 5.7). Only the
problems the specialized rule passed by before (one batch entry, fewer than `WIDE_TILES_BELOW` tiles
of 128 x 256, no operand copied first): what was measured."""
from __future__ import annotations

from ..batch.k_major import row_bytes
from ..batch.tma_k_major import copies_needed
from ..codegen.dialect import Dialect
from ..global_.promotion import wants_promotion
from ..problem import MatmulProblem
from ..tile.wgmma import WgmmaTile
from .base import tile_count
from .ragged import SECTOR_BYTES     # rhs rows that are not whole sectors take the cluster

#: The tile (rows, columns), and the operations below which the specialized kernel's other bounds
#: send 16-bit products to pipelined_wgmma (selector/conditions.py `SPECIALIZED_MIN_FLOP`).
SMALL_WAVE_TILE = (64, 128)
SMALL_WAVE_MAX_FLOP = 1 << 32
#: The specialized rule's own bound on tiles of 128 x 256 (selector/conditions.py
#: `SPECIALIZED_MIN_TILES`): problems with as many already ran the kernel, on tilings of their own.
WIDE_TILES_BELOW = 48


def small_wave(problem: MatmulProblem, dialect: Dialect) -> bool:
    """Whether ``problem`` is such a product: 16-bit operands (not promoted, not grouped, one batch
    entry, none copied first) on an sm_90 CUDA device, under `SMALL_WAVE_MAX_FLOP` operations and
    `WIDE_TILES_BELOW` tiles of 128 x 256, with more than half a wave and at most one of 64 x 128
    tiles."""
    cc = dialect.device.compute_capability
    if dialect.backend != "cuda" or cc is None or cc[0] != 9 or problem.lhs.itemsize != 2 or wants_promotion(problem):
        return False
    if problem.groups is not None or problem.batch != 1 or 2 * problem.m * problem.n * problem.k >= SMALL_WAVE_MAX_FLOP:
        return False
    if tile_count(problem, 128, 256) >= WIDE_TILES_BELOW or copies_needed(problem, WgmmaTile().requires_k_major(problem)):
        return False
    sms = max(1, dialect.device.compute_units)
    return sms // 2 < tile_count(problem, *SMALL_WAVE_TILE) <= sms


def small_rows(problem: MatmulProblem, dialect: Dialect, dense_rules: bool = True) -> bool:
    """Whether the specialized kernel's 64 x 128 tile may take ``problem``'s rows (when they fit a
    wave): output rows (and a row-major b's) of whole 128-byte lines, as first measured, or any
    rows of a plain dense `small_wave` product (``dense_rules``: the caller's tiling is a dense one)."""
    whole = problem.n * problem.out.itemsize % 128 == 0 and problem.n * problem.rhs.itemsize % 128 == 0
    return whole or (dense_rules and small_wave(problem, dialect))


def small_wave_cluster(problem: MatmulProblem, dialect: Dialect, tile: tuple[int, int]) -> bool:
    """Whether a `small_wave` product in ``tile`` (`SMALL_WAVE_TILE`) takes clusters of two cubes
    sharing each rhs slot: rhs rows that are not whole sectors, and no c of the epilogue's own (its
    reads beside the multicast spilled for the larger tiles' clusters, selector/ragged.py)."""
    if tile != SMALL_WAVE_TILE or not small_wave(problem, dialect):
        return False
    ep = problem.epilogue
    return row_bytes(problem, "rhs") % SECTOR_BYTES != 0 and (ep.c is None or ep.accumulate)


__all__ = ["SMALL_WAVE_TILE", "WIDE_TILES_BELOW", "small_rows", "small_wave", "small_wave_cluster"]
