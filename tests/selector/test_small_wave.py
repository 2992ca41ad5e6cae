"""The one-wave rule for small 16-bit products (selector/small_wave.py): which problems it takes
from pipelined_wgmma, and the tiling it gives them."""
from __future__ import annotations

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.selector.small_wave import SMALL_WAVE_TILE, small_rows, small_wave, small_wave_cluster
from gemm_engine.selector.specialized_wgmma import select_specialized_tiling, selected_tiles

from renders import OPENCL_DEVICE, any_problem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))


def test_one_wave_of_small_tiles_only():
    assert small_wave(any_problem((1, 1000, 1000, 1000)), SM90)               # 128 tiles of 64 x 128 on 132
    assert small_wave(any_problem((1, 768, 768, 768), "bfloat16"), SM90)       # 72: more than half a wave
    assert not small_wave(any_problem((1, 512, 512, 512)), SM90)               # 32: level with pipelined_wgmma
    assert not small_wave(any_problem((1, 2000, 1000, 1000)), SM90)            # 256: two waves
    assert not small_wave(any_problem((1, 1024, 1024, 4096)), SM90)            # 2^33 operations: its usual rules
    assert not small_wave(any_problem((2, 500, 1000, 1000)), SM90)             # a batch: not measured
    assert not small_wave(any_problem((1, 64, 12792, 256)), SM90)              # 50 tiles of 128 x 256: its own rules
    assert not small_wave(any_problem((1, 1000, 1000, 1002), align=(2, 2)), SM90)   # copied first for TMA


def test_the_wide_tile_bound_is_the_specialized_rules():
    from gemm_engine.selector.conditions import SPECIALIZED_MIN_TILES
    from gemm_engine.selector.small_wave import WIDE_TILES_BELOW
    assert WIDE_TILES_BELOW == SPECIALIZED_MIN_TILES


def test_sixteen_bit_on_hopper_cuda_only():
    problem = any_problem((1, 1000, 1000, 1000))
    assert not small_wave(problem, SM80)
    assert not small_wave(problem, dialect_for(OPENCL_DEVICE))
    for dtype in ("tf32", "float8_e4m3fn", "int8", "float32"):
        assert not small_wave(any_problem((1, 1000, 1000, 1000), dtype), SM90), dtype


def test_tiling_64_by_128_clustered_over_ragged_rhs_rows():
    ragged = select_specialized_tiling(any_problem((1, 1000, 1000, 1000)), SM90)       # rhs rows of 2000 bytes
    assert selected_tiles(ragged) == SMALL_WAVE_TILE and ragged["stages"] == 6 and ragged.get("cluster_m") == 2
    assert not ragged.get("copy_ragged") and not ragged.get("split_tail")
    aligned = select_specialized_tiling(any_problem((1, 1024, 1024, 1024)), SM90)
    assert selected_tiles(aligned) == SMALL_WAVE_TILE and aligned.get("cluster_m", 1) == 1
    k_major = any_problem((1, 1000, 1000, 1000), "bfloat16", ("row", "col"))           # rhs rows of K: 2000 bytes
    assert small_wave_cluster(k_major, SM90, SMALL_WAVE_TILE)
    assert not small_wave_cluster(any_problem((1, 1000, 1000, 1024), "bfloat16", ("row", "col")), SM90, SMALL_WAVE_TILE)  # 2048 bytes


def test_no_cluster_beside_an_epilogue_c():
    with_c = any_problem((1, 1000, 1000, 1000), epilogue=Epilogue(c=FLOAT16))
    assert not small_wave_cluster(with_c, SM90, SMALL_WAVE_TILE)
    accumulating = any_problem((1, 1000, 1000, 1000), epilogue=Epilogue(c=FLOAT16, accumulate=True))
    assert small_wave_cluster(accumulating, SM90, SMALL_WAVE_TILE)


def test_only_plain_dense_tilings_take_ragged_rows():
    problem = any_problem((1, 1000, 1000, 1000))
    assert small_rows(problem, SM90) and not small_rows(problem, SM90, dense_rules=False)
    assert small_rows(any_problem((1, 1024, 1024, 1024)), SM90, dense_rules=False)       # whole lines: as before
    assert not small_wave_cluster(problem, SM90, (128, 128))
    converting = select_specialized_tiling(problem, SM90, dense_rules=False)
    assert converting.get("cluster_m", 1) == 1 and selected_tiles(converting) != SMALL_WAVE_TILE
