"""tile/swizzle.py: the chunk swizzle permutes each line's chunks, puts the same chunk column of any
8 consecutive lines into 8 distinct 16-byte bank groups (an ldmatrix phase without conflicts),
renders expressions that compute what the numbers say, and refuses lines it cannot swizzle; its
DMMA phases put every half-warp's f64 fragment reads on 16 distinct words."""
from __future__ import annotations

import pytest

from gemm_engine.tile.swizzle import ChunkSwizzle, swizzle_refusal

LINE_BYTES = [16, 32, 64, 128, 256, 512]


@pytest.mark.parametrize("line_bytes", LINE_BYTES)
def test_each_line_is_a_permutation_of_its_chunks(line_bytes):
    sw = ChunkSwizzle(line_bytes)
    for line in range(64):
        assert sorted(sw.chunk_of(line, c) for c in range(sw.chunks)) == list(range(sw.chunks))


@pytest.mark.parametrize("line_bytes", LINE_BYTES)
def test_eight_consecutive_lines_hit_eight_bank_groups(line_bytes):
    sw = ChunkSwizzle(line_bytes)
    for first in range(24):
        for c in range(sw.chunks):
            groups = {(sw.byte_of(first + i, c * sw.vec) // 16) % 8 for i in range(8)}
            assert len(groups) == 8, (line_bytes, first, c)


@pytest.mark.parametrize("line_bytes", [128, 256])
def test_unswizzled_wide_lines_would_conflict(line_bytes):
    """What the swizzle is for: 8 unpadded lines of 128 bytes or more put a chunk column in one group."""
    assert len({(line * line_bytes // 16) % 8 for line in range(8)}) == 1


@pytest.mark.parametrize("line_bytes", LINE_BYTES)
@pytest.mark.parametrize("itemsize", [1, 2, 4])
def test_expressions_match_the_numbers(line_bytes, itemsize):
    sw = ChunkSwizzle(line_bytes, itemsize)
    elem_expr, byte_expr = sw.element("l", "e"), sw.byte_offset("l", "c")
    for line in range(0, 40, 3):
        for e in range(sw.line_elems):
            assert eval(elem_expr, {}, {"l": line, "e": e}) * itemsize == sw.byte_of(line, e)
        for c in range(sw.chunks):
            assert eval(byte_expr, {}, {"l": line, "c": c}) == sw.byte_of(line, c * sw.vec)


def test_the_128_byte_run_is_the_wgmma_swizzle():
    """wgmma's 128-byte swizzle: chunk c of row r at chunk c ^ (r & 7) (SwizzledChunkLoader's runs)."""
    sw = ChunkSwizzle(128)
    assert all(sw.chunk_of(r, c) == c ^ (r & 7) for r in range(16) for c in range(8))


@pytest.mark.parametrize("line_bytes", [0, 8, 48, 96, 192, 200])
def test_refusals(line_bytes):
    assert swizzle_refusal(line_bytes) is not None
    with pytest.raises(ValueError, match="no chunk swizzle"):
        ChunkSwizzle(line_bytes)



def test_elements_must_split_a_chunk():
    with pytest.raises(ValueError, match="3-byte elements"):
        ChunkSwizzle(128, 3)


# -- reads="dmma": the f64 DMMA tile's fragment reads (tile/dmma.py) ----------------------------------
DMMA_LINES = [32, 64, 128, 256, 512, 1024]


@pytest.mark.parametrize("line_bytes", DMMA_LINES)
def test_dmma_lines_are_permutations_and_expressions_match(line_bytes):
    sw = ChunkSwizzle(line_bytes, 8, "dmma")
    elem_expr = sw.element("l", "e")
    for line in range(40):
        assert sorted(sw.chunk_of(line, c) for c in range(sw.chunks)) == list(range(sw.chunks))
        for e in range(sw.line_elems):
            assert eval(elem_expr, {}, {"l": line, "e": e}) * 8 == sw.byte_of(line, e)


def _fragment_reads(shape):
    """Per fragment register: [(k, x)] of the 32 lanes, x the m (lhs) or n (rhs) of the element
    (tile/dmma.py: a_i = A[g + 8 (i & 1)][4 (i >> 1) + t], b_i = B[t + 4 i][g]; m8n8k4: A[g][t])."""
    m, k = shape
    lanes = [(lane >> 2, lane & 3) for lane in range(32)]
    a = [[(4 * (i >> 1) + t, g + 8 * (i & 1)) for g, t in lanes] for i in range(m * k // 32)]
    b = [[(t + 4 * i, g) for g, t in lanes] for i in range(k // 4)]
    return a + b


@pytest.mark.parametrize("line_bytes", DMMA_LINES)
@pytest.mark.parametrize("k_contiguous", [True, False])
@pytest.mark.parametrize("shape", [(16, 8), (16, 16), (8, 4)], ids=["m16n8k8", "m16n8k16", "m8n8k4"])
def test_dmma_half_warps_read_sixteen_distinct_words(line_bytes, k_contiguous, shape):
    """Each half-warp's 16 eight-byte reads of a fragment fall on 16 distinct words modulo 16 (no
    bank conflict), for tiles at any plane origin (multiples of 8 along m / n) and k slice
    (multiples of the instruction's k) the stage places them at; unpadded rows without the swizzle
    conflict where the line is 64 bytes or more."""
    sw = ChunkSwizzle(line_bytes, 8, "dmma")
    k_step = 4 if shape == (8, 4) else 8
    if k_contiguous and line_bytes // 8 < shape[1]:
        pytest.skip("a k-contiguous line holds the stage's k: at least the instruction's")
    extent = line_bytes // 8                                  # elements a line
    origins = range(0, 64, 8) if k_contiguous else range(0, max(8, extent - 8) + 1, 8)
    k_slices = range(0, extent - shape[1] + 1, k_step) if k_contiguous else range(0, 32, k_step)
    plain_conflicts = 0
    for reg in _fragment_reads(shape):
        for x0 in origins:
            for k0 in k_slices:
                where = [(x0 + x, k0 + k) if k_contiguous else (k0 + k, x0 + x) for k, x in reg]
                if not k_contiguous and max(e for _, e in where) >= extent:
                    continue
                for half in (where[:16], where[16:]):
                    words = [sw.byte_of(line, e) // 8 % 16 for line, e in half]
                    assert len(set(words)) == 16, (line_bytes, k_contiguous, x0, k0, words)
                    plain_conflicts += len({(line * extent + e) % 16 for line, e in half}) < 16
    assert plain_conflicts == 0 if line_bytes == 32 else plain_conflicts > 0


def test_unknown_read_patterns_are_refused():
    with pytest.raises(ValueError, match="reads: expected one of"):
        ChunkSwizzle(128, 8, "wmma")
