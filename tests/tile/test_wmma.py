"""WMMA tile: refusals where it cannot run, and the accumulator path through the staging buffer.
Numerics on the GPU run in tests/algorithms/test_algorithms.py (simple_wmma x dtypes x layouts x shapes)."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms import REGISTRY, PlaneSelection
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def problem(et, precision="default"):
    return MatmulProblem(1, 64, 64, 64, et, et, et, precision=precision)


@pytest.mark.parametrize("et,precision,dialect,reason", [
    (FLOAT16, "default", dialect_for(DeviceInfo("opencl", "cpu", 1, 65536, 256, 1)), "needs CUDA"),
    (BFLOAT16, "default", dialect_for(nominal_cuda_device(7, 5)), "sm_80"),
    (FLOAT32, "default", SM90, "opt in with precision='tf32'"),
    (FLOAT64, "default", SM90, "no WMMA shape"),
])
def test_refusals(et, precision, dialect, reason):
    with pytest.raises(SetupError, match=reason):
        REGISTRY["simple_wmma"]().setup(problem(et, precision), dialect)


def test_tile_shape_is_checked():
    bad = REGISTRY["simple_wmma"](PlaneSelection(tile_n=8))
    with pytest.raises(SetupError, match="16x16"):
        bad.setup(problem(FLOAT16), SM90)


@pytest.mark.parametrize("et,precision", [(FLOAT16, "default"), (BFLOAT16, "default"), (FLOAT32, "tf32")])
def test_accumulators_go_through_one_staging_buffer(et, precision):
    alg = REGISTRY["simple_wmma"]()
    cfg = alg.setup(problem(et, precision), SM90)
    src = alg.render(cfg, SM90)
    stage = cfg.batch.global_.stage
    tiles = stage.partition_m * stage.partition_n
    assert src.startswith("/*") and "#include <mma.h>" in src
    assert src.count("LOCAL float wmma_staging[") == 1          # declared once, reused per tile
    assert src.count("store_matrix_sync") == tiles
    assert src.count("SYNC_PLANE();") == 2 * tiles              # before and after every store
    assert ("__float_to_tf32" in src) == (precision == "tf32")
