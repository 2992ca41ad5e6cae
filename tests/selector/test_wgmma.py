"""selector/wgmma.py: the Hopper pipelined (wgmma) tilings."""
from __future__ import annotations

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.selector.wgmma import (CANDIDATES, SWIZZLED_MIN_TILES, candidates, row_k, select_wgmma_tiling,
                                        wgmma_tuning_space)
from renders import any_problem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def shape(sel):
    return sel["warpgroups_m"] * sel["partition_m"] * 64, sel["warpgroups_n"] * sel["tile_n"]


def test_stage_k_is_one_128_byte_row():
    assert row_k(any_problem((1, 64, 64, 64))) == 64
    assert row_k(any_problem((1, 64, 64, 64), "tf32")) == 32
    assert row_k(any_problem((1, 64, 64, 64), "int8")) == 128


def test_largest_tile_with_a_wave_and_the_order_by_tile_count():
    big = select_wgmma_tiling(any_problem((1, 4096, 4096, 4096)), SM90)
    assert shape(big) == (256, 128) and big["dispatch"] == "row_major" and big["staged_output"] is False
    huge = select_wgmma_tiling(any_problem((1, 16384, 8192, 4096)), SM90)
    assert 16384 // 256 * 8192 // 128 >= SWIZZLED_MIN_TILES and huge["dispatch"] == "swizzled"
    # Half the tile past M idles: the 128-row tile for M = 128.
    assert shape(select_wgmma_tiling(any_problem((256, 128, 128, 128)), SM90))[0] == 128
    assert shape(select_wgmma_tiling(any_problem((1, 64, 64, 64)), SM90)) == (64, 64)


def test_short_k_two_slot_ring_and_staged_output():
    short = select_wgmma_tiling(any_problem((1, 8192, 8192, 64)), SM90)
    assert (shape(short), short["stages"], short["wgmma_pending"], short["staged_output"]) == ((64, 128), 2, 0, True)
    assert select_wgmma_tiling(any_problem((1, 4096, 4096, 512)), SM90)["staged_output"] is True
    assert select_wgmma_tiling(any_problem((1, 4096, 4096, 4096), "tf32"), SM90)["staged_output"] is True


def test_promotion_keeps_to_tiles_whose_two_accumulator_sets_fit():
    fp8 = any_problem((1, 4096, 4096, 4096), "float8_e4m3fn", epilogue=Epilogue(lhs_scale="vector", rhs_scale="vector"),
                      out="bfloat16")
    assert candidates(any_problem((1, 4096, 4096, 4096))) == CANDIDATES
    assert all(c[2] * c[3] <= 128 for c in candidates(fp8)) and len(candidates(fp8)) < len(CANDIDATES)


def test_tuning_space_has_both_writers_for_every_candidate():
    p = any_problem((1, 2048, 2048, 2048))
    first = select_wgmma_tiling(p, SM90)
    space = wgmma_tuning_space(p, first)
    assert space[0] == first and {**first, "dispatch": "swizzled"} in space
    assert len([s for s in space if s.get("staged_output") is not None]) >= 2 * len(CANDIDATES)


def test_a_48_kib_device_with_wgmma_takes_the_small_rings():
    """NVIDIA's OpenCL with wgmma (kernels built by nvJitLink): no 4-slot candidate fits 48 KiB,
    so two-slot rings of 48 KiB (aligned in the declaration: no run-time slack), row-major order,
    no batch pending; CUDA keeps its candidates."""
    import dataclasses
    import numpy as np
    from gemm_engine.call.prepare import dense_problem
    from gemm_engine.codegen.device import SASS_BUILD, nominal_cuda_device, nominal_opencl_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.selector.wgmma import CANDIDATES, SMALL_RINGS, select_wgmma_tiling
    plain = nominal_opencl_device("sm_90")
    dialect = dialect_for(dataclasses.replace(plain, features=plain.features | {SASS_BUILD, "wgmma"}))
    sel = select_wgmma_tiling(dense_problem(1, 4096, 4096, 4096, np.dtype(np.float16)), dialect)
    got = tuple(sel[k] for k in ("warpgroups_m", "warpgroups_n", "partition_m", "tile_n", "stages"))
    assert got == SMALL_RINGS[0] and sel["dispatch"] == "row_major" and sel["wgmma_pending"] == 0
    cuda = select_wgmma_tiling(dense_problem(1, 4096, 4096, 4096, np.dtype(np.float16)), dialect_for(nominal_cuda_device(9, 0)))
    assert tuple(cuda[k] for k in ("warpgroups_m", "warpgroups_n", "partition_m", "tile_n", "stages")) in CANDIDATES
