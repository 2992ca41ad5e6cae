"""batch/group_walk.py: the walk over a grouped problem's tiles run on PoCL -- persistent cubes
stepping through tile indices record each (group, tile row, tile column, extent) they visit: every
tile of every group exactly once, empty groups none, extents clamped where routing breaks the
layout's promise -- and the groups word and tile bound."""
from __future__ import annotations

import numpy as np

from gemm_engine.batch.group_walk import GroupWalk, groups_word, tile_bound, LIST_FIELDS
from gemm_engine.batch.order import dispatch_for
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import Groups, MatmulProblem
from helpers import cl_run

SM, SN = 16, 8


def _walk(opencl_engine, layout, groups: np.ndarray, m: int, n: int, k: int, cubes: int = 5):
    d = dialect_for(opencl_engine.device)
    walk = GroupWalk(layout, SM, SN)
    order = dispatch_for("row_major", 1)
    body = ("{ const int at = atomic_inc(count); rec[6 * at] = b; rec[6 * at + 1] = cube_row; "
            "rec[6 * at + 2] = cube_col; rec[6 * at + 3] = LO; rec[6 * at + 4] = HI; rec[6 * at + 5] = cube; }")
    lo, hi = ("group_m", "group_n") if layout == "list" else ("group_lo", "group_hi")
    loop = walk.loop("CUBE_ID", "CUBE_COUNT", [], body.replace("LO", lo).replace("HI", hi),
                     lambda scope: [order.define(scope)])
    t = d.c_type(groups_word(layout))
    source = d.preamble(()) + walk.functions(d) + f"""
__kernel void walk(__global const {t}* groups, __global long* rec, __global int* count) {{
    const i64 batch = {len(groups) // (len(LIST_FIELDS) if layout == 'list' else 1)}, M = {m}, K = {k};
    const i64 cubes_m = {-(-m // SM)}, cubes_n = {-(-n // SN)};
    {loop}
}}
"""
    rec = np.full(6 * 4096, -1, np.int64)
    out = cl_run(opencl_engine, source, "walk", [groups, rec, np.zeros(1, np.int32)], cubes, local=1, out=1)
    rows = out.reshape(-1, 6)
    return rows[rows[:, 0] >= 0]


def _check_tiles(seen, expected):
    got = sorted(tuple(r[:5]) for r in seen)
    assert got == sorted(expected)
    assert len({r[5] for r in seen}) == len(seen)          # one tile index each


def test_contiguous_offsets_clamped(opencl_engine):
    m, n = 70, 20
    offsets = np.array([10, 10, 45, 30, 90], np.int32)       # an empty group, a step back, past M
    # Each offset clamped into [previous offset, M] (grouped_matmul's documented rule): the step back
    # empties group 3, and group 4 starts at the previous offset as given.
    starts = [0, 10, 10, 45, 30]
    ends = [10, 10, 45, 45, 70]
    expected = [(g, r, c, starts[g], ends[g]) for g in range(5)
                for r in range(-(-(ends[g] - starts[g]) // SM)) for c in range(-(-n // SN))]
    _check_tiles(_walk(opencl_engine, "contiguous", offsets, m, n, 32), expected)


def test_masked_counts_clamped(opencl_engine):
    m, n = 40, 16
    counts = np.array([0, 17, -3, 99], np.int32)
    rows = [0, 17, 0, 40]
    expected = [(g, r, c, 0, rows[g]) for g in range(4) for r in range(-(-rows[g] // SM)) for c in range(n // SN)]
    _check_tiles(_walk(opencl_engine, "masked", counts, m, n, 32), expected)


def test_k_groups_share_the_tile_grid(opencl_engine):
    m, n, k = 33, 16, 100
    offsets = np.array([40, 40, 120], np.int32)
    los, his = [0, 40, 40], [40, 40, 100]
    expected = [(g, r, c, los[g], his[g]) for g in range(3) for r in range(-(-m // SM)) for c in range(n // SN)]
    _check_tiles(_walk(opencl_engine, "k", offsets, m, n, k), expected)


def test_list_groups_have_their_own_sizes(opencl_engine):
    sizes = [(20, 9, 5), (0, 4, 4), (16, 16, 3)]
    table = np.array([[mm, nn, kk, 0, 0, 0, 0, 0, 0] for mm, nn, kk in sizes], np.int64).ravel()
    expected = [(g, r, c, mm, nn) for g, (mm, nn, _) in enumerate(sizes)
                for r in range(-(-mm // SM)) for c in range(-(-nn // SN))]
    _check_tiles(_walk(opencl_engine, "list", table, 32, 16, 8), expected)


def test_groups_word_and_tile_bound():
    assert groups_word("list") == "i64" and groups_word("masked") == "i32"
    p = MatmulProblem(4, 70, 20, 32, FLOAT32, FLOAT32, FLOAT32, groups=Groups("contiguous"))
    # Four groups share 70 rows: at most (70 + 4 * 15) / 16 tile rows, times the tile columns.
    assert tile_bound(p, SM, SN) == (70 + 4 * 15) // 16 * 3
    masked = MatmulProblem(4, 40, 16, 32, FLOAT32, FLOAT32, FLOAT32, groups=Groups("masked"))
    assert tile_bound(masked, SM, SN) == 4 * 3 * 2
