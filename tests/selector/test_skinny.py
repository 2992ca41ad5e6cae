"""selector/skinny.py: the skinny kernel's knobs and skinny_split_k's split of K over cubes."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms import SkinnySelection
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.errors import SetupError
from gemm_engine.selector.skinny import (SPLIT_UNROLL, UNITS, resolve_tiling, select_split_skinny, skinny_axis,
                                         skinny_tuning_space, split_skinny_tuning_space)
from renders import OPENCL_DEVICE, any_problem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def test_axis_and_dot_products():
    assert skinny_axis(any_problem((1, 1, 8192, 8192), "bfloat16")) == (True, False)          # x @ W, W row-major
    assert skinny_axis(any_problem((1, 1, 8192, 8192), "bfloat16", ("row", "col"))) == (True, True)
    assert skinny_axis(any_problem((1, 8192, 1, 8192), "bfloat16")) == (False, True)          # W @ x, W row-major


def test_resolve_tiling_fills_only_the_knobs_left_at_zero():
    p = any_problem((1, 1, 8192, 8192), "bfloat16")
    sel = resolve_tiling(SkinnySelection(), p, SM90)
    assert sel.units <= UNITS and sel.outputs and sel.chunk_k and sel.unroll
    assert resolve_tiling(SkinnySelection(unroll=2), p, SM90).unroll == 2
    tiled = any_problem((1, 64, 64, 64))
    assert resolve_tiling(SkinnySelection(), tiled, SM90) == SkinnySelection()   # setup refuses it


def test_split_covers_k_and_gives_about_a_cube_per_multiprocessor():
    p = any_problem((1, 1, 8192, 8192), "bfloat16")
    sel = select_split_skinny(p, SM90)
    assert sel["unroll"] == SPLIT_UNROLL and sel["split_k"] * sel["chunk_k"] >= p.k
    assert sel["split_k"] >= 2 and sel["outputs"] == sel["units"] * 8
    assert select_split_skinny(p, SM90, 16)["split_k"] >= 16 // 2
    with pytest.raises(SetupError, match="contiguous along K"):
        select_split_skinny(any_problem((1, 1, 8192, 8192), "bfloat16", ("row", "col")), SM90)


def test_tuning_spaces_vary_the_loads_in_flight_and_the_splits():
    p = any_problem((1, 1, 4096, 4096), "float32")
    space = skinny_tuning_space(SkinnySelection, p, dialect_for(OPENCL_DEVICE))
    assert space[0] == resolve_tiling(SkinnySelection(), p, dialect_for(OPENCL_DEVICE))
    assert {s.unroll for s in space} >= {2, 4, 8}
    splits = split_skinny_tuning_space(p, SM90)
    assert splits[0] == select_split_skinny(p, SM90) and len({s["split_k"] for s in splits}) > 1
