"""algorithms/family.py: `rank` -- the first member whose rule holds and that sets up, a verdict
per member looked at (refused, not chosen, ranked lower), the fallback -- and a family standing in
for its chosen member (render, signature, launches), refusing when none sets up."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.family import AlgorithmFamily, rank
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
PROBLEM = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)


@dataclass(frozen=True)
class _Rule:
    algorithm: str
    why: str = "because"
    say_no: str | None = None

    def when(self, problem, dialect):
        return self.say_no


def _entries(*specs):
    return [(_Rule(name, say_no=no), REGISTRY[name]()) for name, no in specs]


def test_first_member_that_holds_and_sets_up():
    entries = _entries(("simple_mma", None), ("ordered_unit", "too small"), ("simple_unit", None),
                       ("double_buffering_unit", None))
    member, cfg, verdicts = rank(entries, PROBLEM, CL, "fam", "first")
    assert member.name == "simple_unit" and cfg is not None
    assert [v.verdict for v in verdicts] == ["refused", "not chosen", "chosen"]
    assert "too small" in verdicts[1].reason and verdicts[2].reason == "first: because"
    _, _, every = rank(entries, PROBLEM, CL, "fam", "first", everything=True)
    assert every[-1].verdict == "ranked lower" and "fam takes simple_unit first" in every[-1].reason


def test_fallback_takes_a_declined_member_only_when_asked():
    entries = _entries(("simple_mma", None), ("simple_unit", "its rule says no"))
    member, cfg, verdicts = rank(entries, PROBLEM, CL, "fam", "first")
    assert member is None and cfg is None
    member, cfg, verdicts = rank(entries, PROBLEM, CL, "fam", "first", fallback=True)
    assert member.name == "simple_unit" and verdicts[1].verdict == "chosen"


def test_a_family_stands_in_for_its_member(opencl_engine):
    fam = REGISTRY["simple"]()
    assert issubclass(type(fam), AlgorithmFamily) and fam.is_family and type(fam).selection_class is None
    cfg = fam.setup(PROBLEM, CL)
    member = fam.chosen(cfg)
    assert member.name == "simple_unit"
    assert fam.render(cfg, CL) == member.render(cfg, CL)
    assert fam.signature(cfg).names == member.signature(cfg).names
    assert fam.launches(cfg, PROBLEM) == member.launches(cfg, PROBLEM)


def test_a_family_refuses_when_no_member_runs():
    fam = REGISTRY["split_k"]()
    with pytest.raises(SetupError) as info:
        fam.setup(PROBLEM, CL)
    assert info.value.component == "split_k"
