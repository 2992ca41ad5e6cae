"""selector/base.py: output tile counts and preset lists without repeats."""
from __future__ import annotations

from gemm_engine.selector.base import distinct, tile_count
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
