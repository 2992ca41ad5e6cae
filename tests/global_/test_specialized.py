"""global_/specialized.py: compute units and appended load-only units -- the default count (half,
in whole planes), the refusals (off a plane boundary, too many units, too many unrolled tasks), the
launch's units -- and its kernels on PoCL against float64."""
from __future__ import annotations


import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.specialized import MAX_LOAD_TASKS, SpecializedGlobalMatmul, default_load_units
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, random

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
SPEC = REGISTRY["specialized_unit"]
PROBLEM = MatmulProblem(1, 128, 128, 64, FLOAT32, FLOAT32, FLOAT32)


@pytest.mark.parametrize("compute, plane, load", [(256, 32, 128), (96, 32, 64), (64, 32, 32), (32, 32, 32),
                                                  (256, 64, 128), (100, 1, 50)])
def test_default_load_units(compute, plane, load):
    assert default_load_units(compute, plane) == load


def test_the_launch_has_compute_and_load_units():
    cfg = SPEC().setup(PROBLEM, CL).batch.global_
    assert cfg.compute_units == cfg.stage.units
    assert cfg.load_units == default_load_units(cfg.stage.units, 32) == cfg.rhs_loader.units
    assert cfg.units == cfg.compute_units + cfg.load_units
    chosen = SPEC(load_units=64).setup(PROBLEM, CL).batch.global_
    assert chosen.load_units == 64


def _stage(units, m=64, n=64, k=16):
    return type("Stage", (), {"units": units, "stage_m": m, "stage_n": n, "stage_k": k})()


def test_refusals_name_the_reason():
    level = SpecializedGlobalMatmul()
    sel = type("Sel", (), {"load_units": 0})()
    with pytest.raises(SetupError, match="not on a plane boundary"):
        level.loading_units(_stage(48), sel, CL)
    with pytest.raises(SetupError, match="exceed the device's 1024"):
        level.loading_units(_stage(1024), sel, CL)
    sel.load_units = 8
    with pytest.raises(SetupError, match=f"at most {MAX_LOAD_TASKS}"):
        level.loading_units(_stage(64), sel, CL)
    sel.load_units = -32
    with pytest.raises(SetupError, match="must be positive"):
        level.loading_units(_stage(64), sel, CL)


def test_roles_split_on_the_compute_unit_count():
    alg = SPEC()
    cfg = alg.setup(PROBLEM, CL)
    source = alg.render(cfg, CL)
    assert f"UNIT_ID < {cfg.batch.global_.compute_units}" in source or \
        f"UNIT_ID >= {cfg.batch.global_.compute_units}" in source


@pytest.mark.parametrize("shape", [(70, 33, 90), (128, 64, 128), (1, 1, 1)])
def test_on_pocl(opencl_engine, rng, shape):
    m, k, n = shape
    a, b = random(rng, (m, k), "float32"), random(rng, (k, n), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm="specialized_unit"), a, b, "float32")
