"""selector/dmma.py: the float64 tensor-core tilings per architecture."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.selector.dmma import (PIPELINED_CANDIDATES, pipelined_dmma_presets, pipelined_dmma_tuning_space,
                                       pipelined_dmma_yield_to, select_dmma_tiling, select_pipelined_dmma_tiling,
                                       tile_shape)
from renders import any_problem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))


def stage(sel):
    m = sel["planes_m"] * sel["partition_m"] * sel["tile_m"]
    return m, sel["planes_n"] * sel["partition_n"] * 8


def test_instruction_by_architecture():
    assert tile_shape(SM90) == dict(tile_m=16, tile_k=8)      # m16n8k8
    assert tile_shape(SM80) == dict(tile_m=8, tile_k=0)       # m8n8k4


def test_simple_dmma_largest_stage_that_fills_the_device():
    assert stage(select_dmma_tiling(any_problem((1, 4096, 4096, 4096), "float64"), SM80)) == (128, 64)
    assert stage(select_dmma_tiling(any_problem((1, 64, 64, 64), "float64"), SM80)) == (32, 32)


@pytest.mark.parametrize("n, expected", [(512, (32, 64)), (1000, (64, 64)), (2048, (128, 64)), (4096, (128, 64))])
def test_sm90_stage_by_the_fullness_of_its_waves(n, expected):
    assert stage(select_pipelined_dmma_tiling(any_problem((1, n, n, n), "float64"), SM90)) == expected


def test_carried_fragments_on_sm90_only_with_16_byte_copies():
    assert all(p.get("carry_fragments") for p in pipelined_dmma_presets(SM90))
    assert not any(p.get("carry_fragments") for p in pipelined_dmma_presets(SM80))
    odd = any_problem((1, 4093, 4093, 4093), "float64", align=(1, 1))
    assert not any(p.get("carry_fragments") for p in pipelined_dmma_presets(SM90, odd))
    assert len(pipelined_dmma_presets(SM80)) == len(PIPELINED_CANDIDATES[(8, 0)])


def test_sm80_largest_candidate_that_fills_the_device_and_the_tuning_space():
    p = any_problem((1, 4096, 4096, 4096), "float64")
    first = select_pipelined_dmma_tiling(p, SM80)
    assert stage(first) == (128, 128)
    space = pipelined_dmma_tuning_space(p, SM80, first)
    assert space[0] == first and len(space) == len(PIPELINED_CANDIDATES[(8, 0)])   # the choice is a candidate


def test_yield_to_drops_carried_fragments_when_the_ring_is_the_callers():
    chosen = dict(stages=3, carry_fragments=True)
    assert "carry_fragments" not in pipelined_dmma_yield_to(chosen, dict(stages=2))
    assert "carry_fragments" not in pipelined_dmma_yield_to(chosen, dict(tile_k=4))
    assert pipelined_dmma_yield_to(chosen, dict(stages=4, carry_fragments=True)) == chosen
    assert pipelined_dmma_yield_to(chosen, dict(dispatch="grouped")) == chosen
