"""What the rules reason in besides tile counts: waves of tiles over the multiprocessors, the bytes a
problem must move, its arithmetic intensity, and the weight-streaming problems (a short side
against a big operand: the decode batches LLM serving runs most).

A persistent grid of G cubes over T tiles takes ceil(T / G) tile times; `wave_fill` is the share of
those slots that hold a tile (1.0: whole waves). A product whose short side is at most
`STREAM_MAX_ROWS` and whose big operand is at least `STREAM_MIN_BYTES` spends its time reading that
operand once (a bf16 4096 x 4096 weight at M = 64: 64 multiply-adds a weight element, 2 x 64 flop per
2 bytes, a third of the H100's bf16 ridge of about 330 flop a byte): its kernel must keep every
multiprocessor streaming (bench/SELECTION_NOTES.md, "Weight streaming").

How long a stream takes (`stream_us`, `compute_us`: the H100's measured rates as functions of the
cubes streaming) is what the weight-streaming rules compare their kernels by.
"""
from __future__ import annotations

from ..problem import MatmulProblem

#: The short side up to which a product streams its big operand (cuBLAS's decode times per M level
#: off by 128: ../shared/reference/workload-anchors.md).
STREAM_MAX_ROWS = 128
#: The big operand from which streaming it is the work (smaller ones take about a call's host time).
STREAM_MIN_BYTES = 8 << 20


def waves(tiles: int, cubes: int) -> int:
    """Tile times a grid of ``cubes`` takes over ``tiles`` (0 for none)."""
    return -(-tiles // max(1, cubes))


def wave_fill(tiles: int, cubes: int) -> float:
    """Share of the grid's tile slots over its waves that hold a tile (1.0: whole waves)."""
    return tiles / (waves(tiles, cubes) * max(1, cubes)) if tiles else 0.0


def short_side(problem: MatmulProblem) -> int:
    return min(problem.m, problem.n)


def big_operand_bytes(problem: MatmulProblem) -> int:
    """Bytes of the larger operand of one batch entry (the weight of a decode product; a batch of
    small products, 256 x 128^3, streams nothing big)."""
    return problem.k * max(problem.m * problem.lhs.itemsize, problem.n * problem.rhs.itemsize)


def moved_bytes(problem: MatmulProblem) -> int:
    """Bytes a kernel moves at least: each operand read once, the output written once."""
    b, m, n, k = problem.batch, problem.m, problem.n, problem.k
    return b * (m * k * problem.lhs.itemsize + k * n * problem.rhs.itemsize + m * n * problem.out.itemsize)


def intensity(problem: MatmulProblem) -> float:
    """Operations per byte moved."""
    return 2 * problem.batch * problem.m * problem.n * problem.k / max(1, moved_bytes(problem))


def streams_weights(problem: MatmulProblem) -> bool:
    """Whether the product is a weight-streaming one: a short side of at most `STREAM_MAX_ROWS`
    against a big operand of `STREAM_MIN_BYTES` or more."""
    return short_side(problem) <= STREAM_MAX_ROWS and big_operand_bytes(problem) >= STREAM_MIN_BYTES


#: The read bandwidth as more cubes stream (each a TMA producer keeping a 6-slot ring of 64 x 128
#: tiles full): STREAM_BW x c / (c + STREAM_HALF_CUBES) fits the H100's kernel times of 32 cubes 2.03
#: TB/s, 64 2.36, 112 2.76 and 128 2.75 (bench/SELECTION_NOTES.md, "Weight streaming").
STREAM_BW, STREAM_HALF_CUBES = 3.0e12, 16
#: A cube's tensor-core rate on a streaming tile, by operand bytes (bf16 128 x 128 tiles at M = 128,
#: 4096^2: 32 cubes in 22.4 us, 6.0 TFLOP/s a cube; fp8 runs twice the 16-bit rate).
CUBE_FLOPS = {1: 12.0e12, 2: 6.0e12, 4: 3.0e12}


def stream_us(nbytes: float, cubes: int) -> float:
    """Microseconds ``cubes`` streaming cubes take to read ``nbytes`` (`STREAM_BW`)."""
    cubes = max(1, cubes)
    return nbytes / (STREAM_BW * cubes / (cubes + STREAM_HALF_CUBES)) * 1e6


def compute_us(flops: float, cubes: int, itemsize: int) -> float:
    """Microseconds ``cubes`` take for ``flops`` of ``itemsize``-byte operands (`CUBE_FLOPS`)."""
    return flops / (max(1, cubes) * CUBE_FLOPS.get(itemsize, CUBE_FLOPS[4])) * 1e6
