"""`Engine.explain`: the choice a call would make and why, with no launch."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import MatmulProblem


def names(report):
    return {c.name.split(" -> ")[0] for c in report.considered}


def test_explain_reports_the_heuristic_choice_and_every_other_algorithm(opencl_engine, rng):
    a = rng.standard_normal((100, 70)).astype(np.float32)
    b = rng.standard_normal((70, 90)).astype(np.float32)
    report = opencl_engine.explain(a, b)
    assert report.source == "heuristic" and report.algorithm == "simple_unit"
    assert report.config.batch.global_ is not None and report.selection is not None
    # The same choice matmul makes.
    opencl_engine.matmul(a, b)
    alg, cfg = opencl_engine.last_choice
    assert (alg.name, cfg) == (report.algorithm, report.config)
    # Every registered algorithm is accounted for (split-K's members through auto's gate).
    accounted = names(report) | {n for n in REGISTRY if n.startswith("split_k")}
    assert set(REGISTRY) - {"auto"} <= accounted
    verdicts = {c.name: c for c in report.considered}
    assert verdicts["pipelined_wgmma"].verdict == "refused" and "wgmma" in verdicts["pipelined_wgmma"].reason
    assert verdicts["skinny"].verdict == "refused" and "M or N at most 16" in verdicts["skinny"].reason
    assert verdicts["simple_unit"].verdict == "chosen"
    assert verdicts["double_buffering_unit"].verdict == "not ranked"
    text = str(report)
    for word in ("chosen", "simple_unit", "refused", "batch=1 m=100 n=90 k=70", "float32"):
        assert word in text


def test_explain_a_named_algorithm_and_skinny_ranking(opencl_engine, rng):
    a = rng.standard_normal((1, 64)).astype(np.float32)
    b = rng.standard_normal((64, 300)).astype(np.float32)
    report = opencl_engine.explain(a, b)
    assert report.algorithm == "skinny" and report.source == "heuristic"
    lower = {c.name: c for c in report.considered}["simple_unit"]
    assert lower.verdict == "ranked lower" and "skinny" in lower.reason
    named = opencl_engine.explain(a, b, algorithm="ordered_unit")
    assert named.source == "caller" and named.algorithm == "ordered_unit" and named.family is None


def test_explain_says_which_member_a_family_name_resolved_to(opencl_engine, rng):
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 30)).astype(np.float32)
    report = opencl_engine.explain(a, b, algorithm="specialized")
    # OpenCL has no wgmma: the family's register member runs.
    assert (report.family, report.algorithm, report.source) == ("specialized", "specialized_unit", "caller")
    assert "chosen     specialized -> specialized_unit  (from the caller)" in str(report)
    family = {c.name: c for c in report.considered}["specialized -> specialized_unit"]
    assert family.verdict == "family" and "named by the caller" in family.reason
    assert "specialized_wgmma" in family.reason and "wgmma" in family.reason   # why the better member did not run
    # The family a call names runs the member explain reports.
    opencl_engine.matmul(a, b, algorithm="specialized")
    assert opencl_engine.last_choice[0].name == "specialized_unit"
    # Every family not named says which member it would run here.
    plain = {c.name: c for c in opencl_engine.explain(a, b).considered}
    assert plain["double_buffering -> double_buffering_unit"].verdict == "family"
    assert plain["simple -> simple_unit"].verdict == "family"


def test_explain_takes_a_problem_and_the_call_options(opencl_engine, rng):
    prob = MatmulProblem(2, 33, 17, 65, FLOAT32, FLOAT32, FLOAT32)
    assert opencl_engine.explain(prob).problem == prob
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    report = opencl_engine.explain(a, b, bias=np.ones(4, np.float32), activation="relu")
    assert "relu(acc + bias over columns)" in str(report)


def test_explain_refuses_what_cannot_run_with_the_reasons(opencl_engine):
    with pytest.raises(ValueError, match="runs no kernel"):
        opencl_engine.explain(np.ones((3, 0), np.float32), np.ones((0, 2), np.float32))
    with pytest.raises(Exception, match="sm_90a"):
        opencl_engine.explain(np.ones((64, 64), np.float16), np.ones((64, 64), np.float16),
                              algorithm="pipelined_wgmma")
