"""global_/direct.py (render only): the direct global level stages nothing (no shared memory, no
barrier), moves edge cubes back inside the problem and stores only their own rows / columns, walks K
``stage_k`` steps at a time with a one-step tail, and refuses problems smaller than a stage."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.global_.direct import DirectGlobalMatmul
from gemm_engine.problem import Layout, MatmulProblem

CPU = dialect_for(nominal_opencl_device("cpu"))
F32 = BY_NAME["float32"]


def problem(m, n, k, lhs="row", rhs="row"):
    return MatmulProblem(1, m, n, k, F32, F32, F32, Layout(lhs), Layout(rhs))


def global_level(p, **sel):
    alg = REGISTRY["direct_vector"]()
    selection = replace(alg.selection_for(p, CPU), **sel)
    level = alg.components.global_
    assert isinstance(level, DirectGlobalMatmul)
    return level, level.setup(p, selection, CPU)


def test_edge_checks_follow_divisibility():
    _, cfg = global_level(problem(100, 64, 37), tile_m=10, tile_n=32, stage_m=10, stage_n=32, stage_k=4)
    assert (cfg.check_m, cfg.check_n, cfg.check_k) == (False, False, True)
    _, cfg = global_level(problem(101, 70, 40), tile_m=10, tile_n=32, stage_m=10, stage_n=32, stage_k=4)
    assert (cfg.check_m, cfg.check_n, cfg.check_k) == (True, True, False)


def test_operands_described_in_their_layouts_and_nothing_shared():
    level, cfg = global_level(problem(64, 64, 32, lhs="col"))
    assert Layout(cfg.lhs_loader.operand.layout) is Layout.COL and cfg.stage.lhs_k_contiguous is False
    assert cfg.rhs_loader.operand.k_along_rows and not cfg.lhs_loader.operand.k_along_rows
    assert level.shared_declarations(cfg, CPU) == ""


def test_bounds_only_where_edges_are_checked():
    level, cfg = global_level(problem(101, 70, 40), tile_m=10, tile_n=32, stage_m=10, stage_n=32)
    assert level.bounds(cfg, None, "r", "c") == ["(r) >= dir_skip_m", "(c) >= dir_skip_n"]
    level, cfg = global_level(problem(100, 64, 40), tile_m=10, tile_n=32, stage_m=10, stage_n=32)
    assert level.bounds(cfg, None, "r", "c") == []


def test_refuses_problem_smaller_than_a_stage():
    with pytest.raises(SetupError, match="smaller than the stage"):
        global_level(problem(64, 20, 32), tile_m=8, tile_n=32, stage_m=8, stage_n=32)


def test_refuses_column_major_rhs():
    with pytest.raises(SetupError, match="row-major"):
        global_level(problem(64, 64, 32, rhs="col"))


def test_kernel_moves_edges_back_and_has_k_tail():
    p = problem(101, 70, 37)
    alg = REGISTRY["direct_vector"]()
    src = alg.render(alg.setup(p, CPU), CPU)
    for needle in ("const i64 dir_m0 =", "const i64 dir_n0 =", "const int dir_skip_m =", "i64 dir_k = 0;",
                   "for (; dir_k < ", ">= dir_skip_m", ">= dir_skip_n"):
        assert needle in src, needle
    assert "SYNC_CUBE()" not in src.split("typedef long i64;")[-1]
