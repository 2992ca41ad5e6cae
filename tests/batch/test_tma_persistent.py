"""The persistent TMA batch level (batch/tma_persistent.py): its dispatch order rendered once (a
function each warp role's tile loop calls, on cluster tiles too), and what it reads of its global
level declared (`GlobalConfig.tile_loop`, the writer's ``tma_store``), not probed."""
from __future__ import annotations

import re

import pytest
from dataclasses import replace

import gemm_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.base import DISPATCH_FUNCTION
from gemm_engine.batch.tma_persistent import TmaPersistentBatchMatmul
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.global_.base import TileLoopRequest
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))
BF16 = BY_NAME["bfloat16"]


def _bf16(m=4096, n=4096, k=4096):
    return MatmulProblem(1, m, n, k, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 8)


def test_the_default_kernel_renders_its_dispatch_order_once():
    """bf16 4096^3 on sm_90 (auto's default: the warp-specialized kernel, a tile loop per role)."""
    src = gemm_engine.source("specialized_wgmma", m=4096, n=4096, k=4096, dtype="bfloat16")
    assert src.count("dispatch_per_batch = cubes_m * cubes_n") == 1
    assert src.count(f"INLINE void {DISPATCH_FUNCTION}(") == 1
    # The producer's and the consumers' tile loops both call it.
    calls = re.findall(rf"{DISPATCH_FUNCTION}\(cube, cubes_m, cubes_n, batch, &b, &cube_row, &cube_col\);", src)
    assert len(calls) == 2


def test_cluster_tiles_are_mapped_by_the_same_function():
    alg = SpecializedWgmmaAlgorithm(cluster_m=2)
    src = alg.render(alg.setup(_bf16(), SM90), SM90)
    assert src.count("dispatch_per_batch = cubes_m * cubes_n") == 1
    assert src.count(f"{DISPATCH_FUNCTION}(cube, cluster_rows, cubes_n, batch, &cluster_b, &cluster_row, "
                     f"&cluster_col);") == 2


def test_split_tail_units_are_mapped_by_the_function_in_both_copies_of_the_body():
    e4m3 = BY_NAME["float8_e4m3fn"]
    p = MatmulProblem(1, 4096, 7168, 16384, e4m3, e4m3, BF16, Layout.ROW, Layout.COL, 16, 16)
    alg = SpecializedWgmmaAlgorithm(warpgroups_m=2, partition_m=1, tile_n=128, stages=6, split_tail=3)
    src = alg.render(alg.setup(p, SM90), SM90)
    assert src.count("dispatch_per_batch = cubes_m * cubes_n") == 1
    assert src.count(f"{DISPATCH_FUNCTION}(cube,") == 4      # whole tiles and the tail's part, per role


def test_what_the_loop_reads_of_the_global_level_is_its_declared_request():
    alg = SpecializedWgmmaAlgorithm()
    cfg = alg.setup(_bf16(), SM90).batch
    # one copy of the consumers, no promotion or split tail: a reduction per tile is taken
    assert cfg.global_.tile_loop == TileLoopRequest(cluster_m=1, split_tail=0, ragged_reduction=True)
    asked = replace(cfg, global_=replace(cfg.global_, cluster_m=2, split_tail=0))
    assert asked.global_.tile_loop == TileLoopRequest(cluster_m=2, ragged_reduction=True)
    split = replace(cfg, global_=replace(cfg.global_, split_tail=4))
    assert split.global_.tile_loop == TileLoopRequest(split_tail=4)
    assert TmaPersistentBatchMatmul.cluster_m(asked) == 2 and TmaPersistentBatchMatmul.split_tail(asked) == 0
    # The output's tensor map follows the writer's declared config.
    no_store = replace(cfg, global_=replace(cfg.global_, writer=replace(cfg.global_.writer, tma_store=False)))
    batch = alg.components
    assert "out_map" in batch.signature(cfg).names and "out_map" not in batch.signature(no_store).names


def test_extents_past_32_bit_coordinates_are_refused_and_auto_runs_another_kernel():
    # cp.async.bulk.tensor takes s32 tile coordinates: M = 2^31 + 256 (137 GB of bf16 at N = K = 16,
    # which an H200 holds) would wrap them negative.
    bf16 = BY_NAME["bfloat16"]
    problem = MatmulProblem(1, (1 << 31) + 256, 16, 16, bf16, bf16, bf16, Layout.ROW, Layout.COL, 8, 8)
    with pytest.raises(gemm_engine.SetupError, match="32-bit signed tile coordinates"):
        gemm_engine.source("specialized_wgmma", problem, backend="cuda", arch="sm_90")
    text = gemm_engine.source("auto", problem, backend="cuda", arch="sm_90")
    assert "cp.async.bulk.tensor" not in text
