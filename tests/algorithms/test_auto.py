"""algorithms/auto.py: ``auto`` -- one member per rule of the rule table, no selection of its own,
the first rule's member that applies and sets up (with a verdict per rule), a refusal listing every
rule when none runs -- and its choice on PoCL against float64."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.auto import AutoAlgorithm, decide
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.rules import RULES
from helpers import assert_close, random

SM90 = dialect_for(nominal_cuda_device())


def test_members_follow_the_rules_and_take_no_selection():
    auto = AutoAlgorithm()
    assert [m.name for m in auto.members] == [r.algorithm for r in RULES] and auto.rules == RULES
    with pytest.raises(TypeError, match="auto chooses each member's tiling itself"):
        AutoAlgorithm(tile_m=2)


def test_the_first_rule_that_applies_and_sets_up():
    bf = BY_NAME["bfloat16"]
    problem = MatmulProblem(1, 4096, 4096, 4096, bf, bf, bf, Layout.ROW, Layout.ROW, 8, 8)
    auto = AutoAlgorithm()
    member, cfg, verdicts = decide(auto.members, problem, SM90)
    chosen = [v for v in verdicts if v.verdict == "chosen"]
    assert len(chosen) == 1 and chosen[0].config == cfg and verdicts[-1] is chosen[0]
    assert all(v.verdict in ("refused", "not chosen") for v in verdicts[:-1])
    assert auto.setup(problem, SM90) == cfg and auto.chosen(cfg).name == member.name
    _, _, everything = decide(auto.members, problem, SM90, everything=True)
    assert len(everything) == len(RULES)


def test_no_rule_runs_is_a_refusal_naming_them():
    problem = MatmulProblem(1, 64, 64, 64, FLOAT64, FLOAT64, FLOAT64)
    no_fp64 = dialect_for(DeviceInfo("opencl", "no fp64", 2, 65536, 1024, 32, fp64=False))
    with pytest.raises(SetupError) as info:
        AutoAlgorithm().setup(problem, no_fp64)
    assert info.value.component == "auto" and "no rule's algorithm can run this problem" in str(info.value)
    assert all(rule.algorithm in str(info.value) for rule in RULES)


@pytest.mark.parametrize("shape", [(1, 300, 40), (70, 33, 90), (3, 64, 64, 64)])
def test_on_pocl(opencl_engine, rng, shape):
    *batch, m, k = shape[:-1]
    n = shape[-1]
    a, b = random(rng, (*batch, m, k), "float32"), random(rng, (k, n), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm="auto"), a, b, "float32")
