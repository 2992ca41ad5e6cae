"""batch/split_tail.py: the split-tail schedule run on PoCL -- every cube of a persistent grid
walks `unit_loop` and records each unit it computes: every tile's K slices covered exactly once,
whole tiles in whole waves, the tail split into at most ``max_parts`` parts that differ by at most
one slice -- and the workspace words and scope expressions."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.batch.split_tail import SplitTailScope, flag_words, unit_loop, workspace_words
from gemm_engine.codegen.dialect import dialect_for
from helpers import cl_run

SCOPE = SplitTailScope(partial_words=256)


def _schedule(opencl_engine, cubes, tiles, slices, max_parts):
    d = dialect_for(opencl_engine.device)
    body = ("{ const int at = atomic_inc(count); rec[3 * at] = cube; rec[3 * at + 1] = k_lo; "
            "rec[3 * at + 2] = k_hi; }")
    source = d.preamble(()) + f"""
__kernel void walk(__global long* rec, __global int* count) {{
    const i64 batch = 1, cubes_m = {tiles}, cubes_n = 1;
    {unit_loop(SCOPE, str(slices), [], body, max_parts)}
}}
"""
    rec = np.full(3 * (tiles * max(max_parts, 1) + cubes), -1, np.int64)
    out = cl_run(opencl_engine, source, "walk", [rec, np.zeros(1, np.int32)], cubes, local=1, out=0)
    return out.reshape(-1, 3)[out.reshape(-1, 3)[:, 0] >= 0]


@pytest.mark.parametrize("cubes, tiles, slices, max_parts", [(8, 20, 12, 4), (6, 12, 5, 3), (5, 7, 2, 4),
                                                             (4, 3, 9, 1), (7, 7, 4, 4)])
def test_every_slice_of_every_tile_once(opencl_engine, cubes, tiles, slices, max_parts):
    units = _schedule(opencl_engine, cubes, tiles, slices, max_parts)
    tail = tiles % cubes
    for tile in range(tiles):
        parts = sorted((lo, hi) for c, lo, hi in units if c == tile)
        assert parts[0][0] == 0 and parts[-1][1] == slices
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])), parts    # contiguous, no overlap
        if tile < tiles - tail:
            assert parts == [(0, slices)]                                      # whole waves stay whole
        else:
            assert len(parts) <= max_parts
            sizes = [hi - lo for lo, hi in parts]
            assert max(sizes) - min(sizes) <= 1
    if tail:
        expect = max(1, min(max_parts, cubes // tail, slices))
        assert all(len([1 for c, _, _ in units if c == t]) == expect for t in range(tiles - tail, tiles))


def test_workspace_words_pad_the_flags():
    assert flag_words(1) == 64 and flag_words(64) == 64 and flag_words(132) == 192
    assert workspace_words(132, 1000) == 192 + 132 * 1000


def test_scope_expressions():
    s = SplitTailScope(partial_words=128, k_lo="lo", k_hi="hi")
    assert s.k_range == ("lo", "hi") and s.contributes == "lo > 0" and s.owns_split("S") == "hi < S"
    assert s.flag("c") == "(kept_scratch + (c))"
    # Partial slots start after the padded flags: cube c at flags + c * words.
    for count, cube in ((132, 0), (132, 5), (64, 3)):
        expr = s.partial("cube").replace("CUBE_COUNT", str(count)).replace("(i64)", "").replace("ll", "")
        assert eval(expr, {}, {"kept_scratch": 0, "cube": cube}) == flag_words(count) + cube * 128
    assert "split_cube += split_tail" in s.contributors("add();") and "add();" in s.contributors("add();")
