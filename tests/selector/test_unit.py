"""selector/unit.py: the register-FMA tilings (simple_unit and its variants) on nominal devices."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.selector.unit import (CPU_TILING, ORDERED_LHS_REGS, PLAIN_TILING, SGEMM_TILE, ordered_unit_tiling,
                                       select_unit_tiling, sgemm_tiling, specialized_unit_tiling, unit_tuning_space)
from renders import OPENCL_DEVICE, any_problem

SM90 = dialect_for(nominal_cuda_device(9, 0))
OPENCL = dialect_for(OPENCL_DEVICE)


def stage(sel):
    return sel["stage_m"], sel["stage_n"], sel["stage_k"]


def test_sgemm_stages_by_cubes_per_multiprocessor():
    # 4096^2: 2048 cubes of 128 x 64 (two per SM and more); 1024^2: 128 of them, under 2 x 132.
    assert stage(sgemm_tiling(any_problem((1, 4096, 4096, 4096), "float32"), SM90)) == (128, 64, 16)
    assert stage(sgemm_tiling(any_problem((1, 1024, 1024, 1024), "float32"), SM90)) == (64, 64, 16)
    # Scalar reads with enough 128 x 128 cubes: the larger stage (fewer loads per unit, no spills).
    odd = any_problem((1, 4093, 4093, 4093), "float32", align=(1, 1))
    assert stage(sgemm_tiling(odd, SM90)) == (128, 128, 16)
    assert {k: sgemm_tiling(odd, SM90)[k] for k in SGEMM_TILE} == SGEMM_TILE


def test_unit_tiling_by_backend_and_size():
    big = any_problem((1, 512, 512, 512), "float32")
    assert select_unit_tiling(big, SM90) == sgemm_tiling(big, SM90)           # CUDA float32
    assert select_unit_tiling(big, OPENCL) == CPU_TILING                       # a plane of one work-item
    f64 = any_problem((1, 512, 512, 512), "float64")
    assert select_unit_tiling(f64, SM90) == dict(PLAIN_TILING)                 # 64 x 64 of 4 x 4
    # Small extents shrink the stage so fewer units idle (16 units along each axis).
    small = select_unit_tiling(any_problem((1, 20, 9, 40), "float32"), OPENCL)
    assert (small["stage_m"], small["tile_m"], small["stage_n"], small["tile_n"]) == (32, 2, 16, 1)


def test_specialized_unit_caps_stage_k_on_large_stages():
    odd = any_problem((1, 4093, 4093, 4093), "float32", align=(1, 1))
    assert stage(select_unit_tiling(odd, SM90)) == (128, 128, 16)
    assert stage(specialized_unit_tiling(odd, SM90)) == (128, 128, 8)
    small = any_problem((1, 1024, 1024, 1024), "float32")
    assert specialized_unit_tiling(small, SM90) == select_unit_tiling(small, SM90)   # 64 x 64: kept


@pytest.mark.parametrize("shape, dtype, dialect", [((1, 4096, 4096, 4096), "float32", SM90),
                                                   ((1, 512, 512, 512), "float64", SM90),
                                                   ((1, 512, 512, 512), "float32", OPENCL),
                                                   ((1, 20, 9, 40), "float32", OPENCL)])
def test_ordered_takes_the_same_outputs_as_one_contiguous_tile(shape, dtype, dialect):
    p = any_problem(shape, dtype)
    base, sel = select_unit_tiling(p, dialect), ordered_unit_tiling(p, dialect)
    assert sel["tile_m"] == base["tile_m"] * base.get("partition_m", 1)
    assert sel["tile_n"] == base["tile_n"] * base.get("partition_n", 1)
    assert (sel["partition_m"], sel["partition_n"], sel["partition"]) == (1, 1, "contiguous")
    assert sel["stage_k"] * sel["tile_m"] <= ORDERED_LHS_REGS and sel["stage_k"] >= 1


def test_tuning_space_starts_with_the_choice_and_has_no_repeats():
    p = any_problem((1, 4096, 4096, 4096), "float32")
    first = specialized_unit_tiling(p, SM90)
    space = unit_tuning_space(first)
    assert space[0] == first and len(space) == len({tuple(sorted(s.items())) for s in space})
    assert CPU_TILING in space and PLAIN_TILING in space
    # The choice is one of the fixed tilings here: listed once.
    assert len(unit_tuning_space(sgemm_tiling(p, SM90))) == 5
