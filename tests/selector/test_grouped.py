"""selector/grouped.py: the grouped Hopper pipeline's tile by the rows a group has -- the 64-row tile
for groups of at most 64 rows, 128 x 128 for promoting problems of at most 128, the dense rule's
otherwise -- each setting up under grouped_specialized_wgmma on the nominal sm_90 device; and the
quantized decode kernel's row tiles for quantized experts."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT32
from gemm_engine.problem import Groups, Layout, MatmulProblem
from gemm_engine.quant import WeightFormat
from gemm_engine.selector.grouped import (DECODE_PLANES, DECODE_ROW_TILES, PROMOTED_GROUP, SMALL_GROUP,
                                          grouped_specialized_tiling)

SM90 = dialect_for(nominal_cuda_device())
BF16, E4M3 = BY_NAME["bfloat16"], BY_NAME["float8_e4m3fn"]
DENSE = {"warpgroups_m": 2, "tile_n": 256, "stages": 4}


def _typical(m, et=BF16, out=None):
    return MatmulProblem(8, m, 4096, 2048, et, et, out or et, Layout.ROW, Layout.COL, 16, 16)


@pytest.mark.parametrize("m, et, shape", [(1, BF16, SMALL_GROUP), (64, BF16, SMALL_GROUP), (64, E4M3, SMALL_GROUP),
                                          (100, E4M3, PROMOTED_GROUP), (128, E4M3, PROMOTED_GROUP)])
def test_few_rows_take_the_small_tiles(m, et, shape):
    out = FLOAT32 if et is E4M3 else None
    got = grouped_specialized_tiling(_typical(m, et, out), SM90, DENSE)
    wm, wn, pm, tn, _ = shape
    assert (got["warpgroups_m"], got["warpgroups_n"], got["partition_m"], got["tile_n"]) == (wm, wn, pm, tn)
    assert got.get("promote_behind", False) == (et is E4M3)


@pytest.mark.parametrize("m, et", [(65, BF16), (129, E4M3), (4096, BF16), (65, FLOAT32)])
def test_larger_groups_keep_the_dense_rule(m, et):
    out = FLOAT32 if et is E4M3 else None
    assert grouped_specialized_tiling(_typical(m, et, out), SM90, DENSE) == DENSE


@pytest.mark.parametrize("m", [32, 64])
def test_the_small_tiling_sets_up(m):
    problem = dataclasses.replace(_typical(8 * m), groups=Groups("contiguous"))
    alg = REGISTRY["grouped_specialized_wgmma"]()
    cfg = alg.setup(problem, SM90)
    assert cfg.selection.warpgroups_m == 1 and cfg.selection.tile_n == 128


@pytest.mark.parametrize("layout, m, tiles", [("contiguous", 64, DECODE_ROW_TILES[0]),    # 8 rows a group
                                              ("contiguous", 128, DECODE_ROW_TILES[0]),   # 16
                                              ("contiguous", 136, DECODE_ROW_TILES[1]),   # 17
                                              ("contiguous", 512, DECODE_ROW_TILES[1]),   # 64
                                              ("masked", 64, DECODE_ROW_TILES[0]),        # a bound, not a count
                                              ("masked", 4, DECODE_ROW_TILES[0])])
def test_quantized_experts_take_the_grouped_decode_tiles(layout, m, tiles):
    """The decode member's tile by the rows a routing gives a group (not the typical group's alone:
    a group past the tile streams its expert's weights once more per tile), set up as chosen."""
    weights = WeightFormat("int4", 128, True, "bf16_bits", "prepacked")
    problem = MatmulProblem(8, m, 14336, 4096, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 1, weights=weights,
                            groups=Groups(layout))
    alg = REGISTRY["grouped_quantized_decode"]()
    cfg = alg.setup(problem, SM90)
    assert (cfg.selection.row_tiles, cfg.selection.planes) == (tiles, DECODE_PLANES)
    assert cfg.batch.global_.m_tiles == tiles and cfg.batch.walk.stage_m == 8 * tiles


@pytest.mark.parametrize("rows, k, taken", [(32, 4096, False), (100, 4096, True), (512, 4096, True),
                                            (1024, 4096, True), (1024, 14336, True), (8192, 14336, True)])
def test_quantized_experts_keep_the_register_path_past_the_dense_bound(rows, k, taken):
    """Past 512 rows a group (and 256 over a long K) the dense rule hands a quantized product to the
    dequantizing pass, which no grouped level has: the grouped rule keeps wgmma's register path
    there (the member after it, the dequantizing loader, ran 1024-row int4 groups over ten times
    slower); below 48 rows the decode member takes them."""
    from gemm_engine.algorithms.grouped import typical
    from gemm_engine.selector.grouped import grouped_wgmma_worth_it
    weights = WeightFormat("int4", 128, True, "bf16_bits", "prepacked")
    problem = MatmulProblem(8, 8 * rows, 4096, k, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 1, weights=weights,
                            groups=Groups("contiguous"))
    assert (grouped_wgmma_worth_it(typical(problem), SM90) is None) == taken
    sm80 = dialect_for(nominal_cuda_device(8, 0))
    assert grouped_wgmma_worth_it(typical(problem), sm80) is not None      # wgmma: sm_90 only
