"""selector/base.py: output tile counts and preset lists without repeats."""
from __future__ import annotations

from gemm_engine.dtypes import FLOAT16
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.base import distinct, fit_ring, ring_bytes, tile_count
from renders import any_problem


def test_tile_count_rounds_each_axis_up_and_counts_batches():
    assert tile_count(any_problem((1, 128, 256, 64)), 128, 256) == 1
    assert tile_count(any_problem((1, 129, 256, 64)), 128, 256) == 2
    assert tile_count(any_problem((3, 129, 257, 64)), 128, 256) == 3 * 2 * 2
    assert tile_count(any_problem((2, 1, 1, 5)), 64, 64) == 2


def test_distinct_keeps_the_first_of_equal_presets_in_order():
    a, b = dict(stage_m=64, stage_n=64), dict(stage_n=64, stage_m=64)   # equal: key order means nothing
    assert distinct([a, dict(stage_m=128), b, dict(stage_m=128)]) == [a, dict(stage_m=128)]
    assert distinct([]) == []


def test_fit_ring_keeps_what_fits_and_shrinks_the_rest():
    p = MatmulProblem(1, 4096, 4096, 4096, FLOAT16, FLOAT16, FLOAT16, Layout.ROW, Layout.ROW, 8, 8)
    preset = dict(stage_k=64, stages=3, carry_fragments=True)
    # 128 x 256 x 64 in 3 slots: lhs 128 x 72, rhs 64 x 264 halves a slot.
    assert ring_bytes(p, 128, 256, 64, 3, 2, 8) == 3 * (128 * 72 + 64 * 264) * 2
    assert fit_ring(p, preset, 128, 256, 2, 8, 232448, 16) == preset          # the H100's shared memory
    small = fit_ring(p, preset, 128, 256, 2, 8, 48 * 1024, 16)                 # NVIDIA's OpenCL driver
    assert small["stages"] == 2 and ring_bytes(p, 128, 256, small["stage_k"], 2, 2, 8) <= 48 * 1024
    assert "carry_fragments" not in small                                       # two slots cannot carry
    assert fit_ring(p, preset, 1024, 1024, 2, 8, 48 * 1024, 16) is None
