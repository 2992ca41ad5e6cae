"""global_/simple.py: the single-stage global matmul -- the stage tiles it asks its loaders for
(bounds checks only on undivided axes, vector alignment, k along columns for lhs and rows for rhs),
its shared-memory check naming the need and the limit, and its kernels on PoCL against float64 at
shapes that leave partial tiles on every axis."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.simple import SimpleGlobalMatmul, operand_tiles
from gemm_engine.problem import Layout, MatmulProblem
from helpers import assert_close, random

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))


def _stage(m=100, n=64, k=40, **kw):
    problem = MatmulProblem(1, m, n, k, FLOAT32, FLOAT32, FLOAT32, **kw)
    cfg = SimpleUnitAlgorithm().setup(problem, CL).batch.global_
    return problem, cfg


def test_operand_tiles_checks_and_orientation():
    problem, cfg = _stage(100, 64, 40, lhs_align=4, rhs_layout=Layout.COL)
    st = cfg.stage
    lhs, rhs = operand_tiles(problem, st)
    assert (lhs.rows, lhs.cols, rhs.rows, rhs.cols) == (st.stage_m, st.stage_k, st.stage_k, st.stage_n)
    assert lhs.check_rows == (100 % st.stage_m != 0) and lhs.check_cols == (40 % st.stage_k != 0)
    assert rhs.check_rows == lhs.check_cols and rhs.check_cols == (64 % st.stage_n != 0)
    assert not lhs.k_along_rows and rhs.k_along_rows
    assert lhs.align == 4 and rhs.layout is Layout.COL and lhs.layout is Layout.ROW
    assert cfg.check_m and not cfg.check_n and cfg.check_k


def test_loader_configs_come_from_these_tiles():
    _, cfg = _stage(64, 64, 64)
    assert not (cfg.check_m or cfg.check_n or cfg.check_k)
    assert cfg.lhs_loader.operand.ident == "lhs" and cfg.rhs_loader.operand.ident == "rhs"
    assert cfg.lhs_loader.units == cfg.stage.units


def test_shared_memory_over_the_device_limit_is_refused():
    small = dialect_for(DeviceInfo("opencl", "small", 1, 4096, 1024, 32))
    with pytest.raises(SetupError, match=r"needs \d+ bytes of shared memory, the device allows 4096"):
        SimpleUnitAlgorithm().setup(MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32), small)


def test_shared_declarations_size_both_stages():
    _, cfg = _stage()
    text = SimpleGlobalMatmul().shared_declarations(cfg, CL)
    assert f"[{cfg.stage.lhs_smem_elems}]" in text and f"[{cfg.stage.rhs_smem_elems}]" in text


@pytest.mark.parametrize("shape", [(1, 1, 1), (67, 45, 33), (2, 64, 16, 64)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_on_pocl(opencl_engine, rng, shape, dtype):
    *batch, m, k, n = shape
    a, b = random(rng, (*batch, m, k), dtype), random(rng, (k, n), dtype)
    assert_close(opencl_engine.matmul(a, b, algorithm="simple_unit"), a, b, dtype)


def test_transposed_operands_on_pocl(opencl_engine, rng):
    a, b = random(rng, (29, 37), "float64").T, random(rng, (19, 29), "float64").T
    assert_close(opencl_engine.matmul(a, b, algorithm="simple_unit"), a, b, "float64")
