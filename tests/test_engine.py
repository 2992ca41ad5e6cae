"""engine.py: the Engine's own behaviour on PoCL -- its precision check, what it exposes, a call
through the general path against float64, names resolved once, plans chosen once per (algorithm,
problem), `plan` and `problem_for` without launching, and the tuning cache switch."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine import Engine
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, random


def test_precision_is_checked_by_name():
    with pytest.raises(ValueError, match="precision: expected one of"):
        Engine("opencl", precision="fp8")


def test_properties_are_the_runtimes(opencl_engine):
    e = opencl_engine
    assert e.backend == "opencl" == e.runtime.backend
    assert e.device is e.runtime.device and e.dialect is e.runtime.dialect
    assert e.handle > 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_a_named_algorithm_computes_the_product(opencl_engine, rng, dtype):
    a, b = random(rng, (2, 19, 13), dtype), random(rng, (13, 21), dtype)
    out = opencl_engine.matmul(a, b, algorithm="simple_unit")
    assert out.dtype == np.dtype(dtype) and out.shape == (2, 19, 21)
    assert_close(out, a, b, dtype)
    alg, cfg = opencl_engine.last_choice
    assert isinstance(alg, SimpleUnitAlgorithm) and cfg.algorithm.endswith("SimpleUnitAlgorithm")


def test_compute_and_matmul_agree_on_host_arrays(opencl_engine, rng):
    a, b = random(rng, (7, 5), "float32"), random(rng, (5, 3), "float32")
    np.testing.assert_array_equal(opencl_engine.compute(a, b), opencl_engine.matmul(a, b))


def test_names_resolve_once_and_instances_are_used_as_given(opencl_engine):
    first = opencl_engine.resolve("simple_unit")
    assert opencl_engine.resolve("simple_unit") is first
    mine = SimpleUnitAlgorithm()
    assert opencl_engine.resolve(mine) is mine
    with pytest.raises(Exception, match="no_such_algorithm"):
        opencl_engine.resolve("no_such_algorithm")


def test_an_unknown_algorithm_fails_even_with_nothing_to_compute(opencl_engine):
    with pytest.raises(Exception, match="no_such_algorithm"):
        opencl_engine.matmul(np.zeros((0, 3)), np.zeros((3, 2)), algorithm="no_such_algorithm")


def test_plans_are_chosen_once_per_algorithm_and_problem(opencl_engine):
    problem = opencl_engine.problem_for(np.ones((8, 12), np.float32), np.ones((12, 4), np.float32))
    plan = opencl_engine.plan_for(problem, "simple_unit")
    assert opencl_engine.plan_for(problem, "simple_unit") is plan
    assert plan.algorithm.name == "simple_unit"


def test_plan_renders_without_compiling(opencl_engine):
    problem = MatmulProblem(1, 40, 24, 8, FLOAT32, FLOAT32, FLOAT32)
    before = len(opencl_engine.planner)
    alg, cfg, source = opencl_engine.plan(problem, "simple_unit")
    assert alg.name == "simple_unit" and "gemm_engine_kernel" in source and cfg.batch is not None
    assert len(opencl_engine.planner) == before


def test_problem_for_runs_the_calls_checks(opencl_engine):
    p = opencl_engine.problem_for(np.ones((3, 4, 5), np.float16), np.ones((5, 6), np.float16), bias=np.ones(6, np.float16),
                                  activation="relu")
    assert (p.batch, p.m, p.n, p.k) == (3, 4, 6, 5) and p.out.name == "float16"
    assert p.epilogue.bias is not None and p.epilogue.activation is not None
    with pytest.raises(ValueError, match="runs no kernel"):
        opencl_engine.problem_for(np.ones((3, 0)), np.ones((0, 2)))
    with pytest.raises(ValueError):
        opencl_engine.problem_for(np.ones((3, 4)), np.ones((5, 2)))


def test_without_the_tuning_cache_nothing_is_tuned(opencl_engine):
    e = Engine("opencl", use_tuning_cache=False)
    problem = e.problem_for(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))
    assert e.tuned_algorithm(problem) is None
