"""selector/mma.py: the mma.sync (plane) tilings: simple_mma / simple_wmma and the pipelined ring."""
from __future__ import annotations

import dataclasses

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.selector.mma import (PIPELINED_CANDIDATES, REGISTER_PATH_LARGE, UNALIGNED_LARGE, pipelined_preset,
                                      pipelined_tuning_space, select_pipelined_tiling, select_plane_tiling,
                                      wmma_tiling)
from renders import any_problem

SM80 = dialect_for(nominal_cuda_device(8, 0))


def ring(sel):
    return tuple(sel[k] for k in ("planes_m", "planes_n", "partition_m", "partition_n", "stage_k", "stages"))


def test_plane_tiling_halves_the_partition_along_short_axes():
    assert select_plane_tiling(any_problem((1, 512, 512, 64)), SM80) == dict(partition_m=4, partition_n=4,
                                                                            precision="default")
    assert select_plane_tiling(any_problem((1, 64, 512, 64)), SM80)["partition_m"] == 2
    assert select_plane_tiling(any_problem((1, 512, 64, 64)), SM80)["partition_n"] == 2
    # int8: the instruction's k is 32, at most 4 x 2 tiles a plane.
    i8 = select_plane_tiling(any_problem((1, 512, 512, 64), "int8"), SM80)
    assert (i8["partition_n"], i8["stage_k"]) == (2, 32)


def test_wmma_tiles_are_16_wide_with_half_the_n_partition():
    p = any_problem((1, 512, 512, 64))
    assert wmma_tiling(p, SM80) == {**select_plane_tiling(p, SM80), "tile_n": 16, "partition_n": 2}


def test_pipelined_takes_the_largest_stage_that_fills_the_device():
    assert ring(select_pipelined_tiling(any_problem((1, 4096, 4096, 4096)), SM80)) == PIPELINED_CANDIDATES[0]
    # 1536^2: 72 cubes of 128 x 256 leave some of the 108 multiprocessors idle, 144 of 128 x 128 do not.
    assert ring(select_pipelined_tiling(any_problem((1, 1536, 1536, 1536)), SM80)) == PIPELINED_CANDIDATES[1]
    assert ring(select_pipelined_tiling(any_problem((1, 64, 64, 64)), SM80)) == PIPELINED_CANDIDATES[-1]


def test_pipelined_unaligned_and_tf32_stages():
    big = (1, 4096, 4096, 4096)
    assert ring(select_pipelined_tiling(any_problem(big, align=(4, 8)), SM80)) == UNALIGNED_LARGE
    assert ring(select_pipelined_tiling(any_problem(big, align=(1, 8)), SM80)) == REGISTER_PATH_LARGE
    tf32 = select_pipelined_tiling(any_problem(big, "tf32"), SM80, "tf32")
    assert tf32["stage_k"] == PIPELINED_CANDIDATES[0][4] // 2 and tf32["precision"] == "tf32"
    short = select_pipelined_tiling(any_problem((1, 8192, 8192, 64), "tf32"), SM80, "tf32")
    assert ring(short)[:4] == PIPELINED_CANDIDATES[-1][:4]   # output-bound: the most cubes in flight


def test_pipelined_tuning_space_covers_every_candidate():
    p = any_problem((1, 1000, 1000, 1000))
    first = select_pipelined_tiling(p, SM80)
    space = pipelined_tuning_space(p, first)
    assert space[0] == first
    for c in PIPELINED_CANDIDATES:
        assert any(all(s[k] == v for k, v in pipelined_preset(*c).items()) for s in space), c


def test_a_small_local_memory_keeps_stage_k_rather_than_the_largest_stage():
    """48 KiB (NVIDIA's OpenCL driver): the 128 x 256 stage fits only at half its stage_k, so the
    largest stage that keeps its stage_k is taken (measured faster: bench/SELECTION_NOTES.md)."""
    small = dialect_for(dataclasses.replace(nominal_cuda_device(9, 0), max_shared_memory=48 * 1024))
    sel = select_pipelined_tiling(any_problem((1, 4096, 4096, 4096)), small)
    assert ring(sel)[:5] == PIPELINED_CANDIDATES[1][:5] and sel["stages"] >= 2
    # With room for every ring, the largest stage as before.
    assert ring(select_pipelined_tiling(any_problem((1, 4096, 4096, 4096)), SM80)) == PIPELINED_CANDIDATES[0]


def test_kernels_built_by_nvjitlink_take_swizzled_rows_where_padded_ones_lose_slots():
    """NVIDIA's OpenCL with its PTX compiled by nvJitLink (the SASS_BUILD feature): the 128 x 128 x 32
    ring keeps 3 slots in 48 KiB as swizzled rows, where padded rows fit only 2 (measured 393 against
    269 TFLOP/s, bench/SELECTION_NOTES.md); under the driver's own compile the padded ring stays."""
    from gemm_engine.codegen.device import SASS_BUILD, nominal_opencl_device
    plain = nominal_opencl_device("sm_90")
    built = dataclasses.replace(plain, features=plain.features | {SASS_BUILD})
    square = any_problem((1, 4096, 4096, 4096))
    sel = select_pipelined_tiling(square, dialect_for(built))
    assert sel.get("smem_swizzle") and ring(sel) == PIPELINED_CANDIDATES[1][:5] + (3,)
    assert not select_pipelined_tiling(square, dialect_for(plain)).get("smem_swizzle")
    # int8: swizzled rows would give the 128 x 256 stage a longer k in no more slots: padded rows.
    assert not select_pipelined_tiling(any_problem((1, 4096, 4096, 4096), "int8"), dialect_for(built)).get("smem_swizzle")
    # Rings that fit as they are stay padded.
    assert not select_pipelined_tiling(any_problem((1, 1000, 1000, 1000)), dialect_for(built)).get("smem_swizzle")
