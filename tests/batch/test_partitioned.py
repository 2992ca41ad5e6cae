"""batch/partitioned.py: one cube per tile, or persistent cubes (never more than the tiles, only over a
reentrant global level), its signature's parameter order, and its kernels on PoCL against float64
for every dispatch order, persistent grids and broadcast batches."""
from __future__ import annotations

import types

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.partitioned import PartitionedBatchMatmul
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.simple import SimpleGlobalMatmul
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, random

PROBLEM = MatmulProblem(3, 100, 130, 40, FLOAT32, FLOAT32, FLOAT32)


def test_cube_counts(opencl_engine):
    d = opencl_engine.dialect
    tiles = 3 * 2 * 3                                         # 64 x 64 stage tiles
    alg = SimpleUnitAlgorithm()
    cfg = alg.setup(PROBLEM, d)
    assert alg.cube_count(cfg, PROBLEM) == tiles and cfg.batch.persistent_cubes == 0
    persistent = SimpleUnitAlgorithm(persistent=1)
    pcfg = persistent.setup(PROBLEM, d)
    assert pcfg.batch.persistent_cubes == d.device.compute_units
    assert persistent.cube_count(pcfg, PROBLEM) == min(tiles, d.device.compute_units)
    many = SimpleUnitAlgorithm(persistent=100)
    assert many.cube_count(many.setup(PROBLEM, d), PROBLEM) == tiles        # never more than the tiles


def test_persistent_refusals(opencl_engine):
    level = PartitionedBatchMatmul(SimpleGlobalMatmul())
    sel = types.SimpleNamespace(dispatch="row_major", dispatch_width=4, persistent=-1)
    with pytest.raises(SetupError, match="persistent=-1"):
        level.setup(PROBLEM, sel, opencl_engine.dialect)

    class Once(SimpleGlobalMatmul):
        name = "once_global"
        reentrant = False
    sel.persistent = 1
    with pytest.raises(SetupError, match="once_global is not reentrant"):
        PartitionedBatchMatmul(Once()).setup(PROBLEM, sel, opencl_engine.dialect)


def test_signature_order(opencl_engine):
    alg = SimpleUnitAlgorithm()
    names = alg.signature(alg.setup(PROBLEM, opencl_engine.dialect)).names
    assert names[:16] == ("lhs_base", "lhs_offset", "lhs_ld", "lhs_batch_stride", "rhs_base", "rhs_offset",
                          "rhs_ld", "rhs_batch_stride", "out_base", "out_offset", "out_ld", "out_batch_stride",
                          "M", "N", "K", "batch")


@pytest.mark.parametrize("selection", [{}, {"dispatch": "col_major"}, {"dispatch": "swizzled", "dispatch_width": 3},
                                       {"persistent": 1}, {"persistent": 1, "dispatch": "grouped", "dispatch_width": 2}])
def test_on_pocl(opencl_engine, rng, selection):
    a, b = random(rng, (3, 1, 100, 40), "float32"), random(rng, (2, 40, 130), "float32")   # broadcast batches
    got = opencl_engine.matmul(a, b, algorithm=SimpleUnitAlgorithm(**selection))
    assert got.shape == (3, 2, 100, 130)
    assert_close(got, a, b, "float32")
