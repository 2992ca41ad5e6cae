"""call/choose.py: a family name resolves to its member and the choice (and explain) says so; on a
nominal Hopper device (no GPU: the policy sets up, nothing runs)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from gemm_engine.call.choose import ChoicePolicy
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.explain import explain_problem
from renders import any_problem

DEVICE = nominal_cuda_device(9, 0)
POLICY = ChoicePolicy(dialect_for(DEVICE), lambda problem: None)


def test_a_family_name_resolves_to_its_member_and_keeps_the_family():
    choice = POLICY.choose(any_problem((1, 4096, 4096, 4096)), "specialized")
    assert (choice.algorithm.name, choice.family, choice.source) == ("specialized_wgmma", "specialized", "caller")
    plain = POLICY.choose(any_problem((1, 4096, 4096, 4096)), "specialized_wgmma")
    assert plain.family is None and plain.config == choice.config
    assert POLICY.choose(any_problem((1, 4096, 4096, 4096))).family is None      # auto's choice


def test_the_trace_says_which_member_and_why_not_the_better_ones():
    small_tf32 = any_problem((1, 512, 512, 512), "tf32")
    choice = POLICY.choose(small_tf32, "double_buffering", trace=True)
    assert choice.algorithm.name == "pipelined_mma"
    verdicts = {v.name: v for v in choice.trace}
    family = verdicts["double_buffering -> pipelined_mma"]
    assert family.verdict == "family" and "named by the caller" in family.reason
    assert "pipelined_wgmma: its rule says no here" in family.reason
    # Families not named say what they would run here.
    assert verdicts["specialized -> specialized_wgmma"].verdict == "family"
    assert verdicts["ordered -> ordered_unit"].verdict == "family"


def test_explain_prints_family_arrow_member():
    engine = SimpleNamespace(choose=POLICY.choose, device=DEVICE)
    report = explain_problem(engine, any_problem((1, 4096, 4096, 4096), "bfloat16"), "specialized")
    assert (report.family, report.algorithm, report.chosen) == ("specialized", "specialized_wgmma",
                                                                "specialized -> specialized_wgmma")
    assert "chosen     specialized -> specialized_wgmma  (from the caller)" in str(report)
    assert explain_problem(engine, any_problem((1, 64, 64, 64), "float32")).family is None


def test_a_family_that_cannot_run_is_the_callers_answer():
    # Scales per block of K are applied by the Hopper kernel only (matmul dequantizes elsewhere).
    fp8 = any_problem((1, 64, 64, 64), "float8_e4m3fn", out="bfloat16",
                      epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    with pytest.raises(SetupError, match="no variant can run"):
        ChoicePolicy(dialect_for(nominal_cuda_device(8, 0)), lambda p: None).choose(fp8, "simple")
