"""tile/swizzle.py: the chunk swizzle permutes each line's chunks, puts the same chunk column of any
8 consecutive lines into 8 distinct 16-byte bank groups (an ldmatrix phase without conflicts),
renders expressions that compute what the numbers say, and refuses lines it cannot swizzle."""
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
