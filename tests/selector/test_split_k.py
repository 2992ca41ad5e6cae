"""selector/split_k.py: the split-K members' tuning spaces."""
from __future__ import annotations

from gemm_engine.algorithms import UnitSelection
from gemm_engine.selector.split_k import SPLIT_COUNTS, split_k_tuning_space


def test_the_choice_then_each_fixed_split_count():
    space = split_k_tuning_space(dict(stage_m=64, split_k=0))
    assert space == [dict(stage_m=64, split_k=0)] + [dict(stage_m=64, split_k=s) for s in SPLIT_COUNTS]
    assert len(split_k_tuning_space(dict(split_k=16))) == len(SPLIT_COUNTS)   # 16 is listed once


def test_a_selection_is_taken_as_its_values():
    space = split_k_tuning_space(UnitSelection(stage_m=32))
    assert space[0] == UnitSelection(stage_m=32).values_dict()
    assert [s["split_k"] for s in space[1:]] == list(SPLIT_COUNTS) and all(s["stage_m"] == 32 for s in space)
