"""tuning/space.py: the contenders -- the rules' algorithms (families by their members), exhaustive
adding every other registered algorithm but families -- and `candidates` for a problem: each with a
whole selection from its tuning space, refusals by name (a refusing or crashing algorithm)."""
from __future__ import annotations

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.family import AlgorithmFamily
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.compose.selection import Selection
from gemm_engine.dtypes import BY_NAME, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.rules import RULES
from gemm_engine.tuning import space
from gemm_engine.tuning.space import candidate_names, candidates


def test_names_come_from_the_rules_with_families_expanded():
    names = candidate_names()
    assert len(names) == len(set(names))
    assert not any(issubclass(REGISTRY[n], AlgorithmFamily) for n in names)
    for rule in RULES:
        if rule.tune and rule.algorithm in REGISTRY:
            cls = REGISTRY[rule.algorithm]
            members = [m.name for m in cls().members] if issubclass(cls, AlgorithmFamily) else [rule.algorithm]
            assert set(members) <= set(names)


def test_exhaustive_adds_every_other_algorithm():
    every = candidate_names(exhaustive=True)
    assert candidate_names() == every[:len(candidate_names())]
    assert set(every) == set(candidate_names()) | {n for n, c in REGISTRY.items() if not issubclass(c, AlgorithmFamily)}


def test_candidates_have_whole_selections_and_set_up():
    d = dialect_for(nominal_cuda_device())
    bf = BY_NAME["bfloat16"]
    problem = MatmulProblem(1, 1024, 1024, 1024, bf, bf, bf, Layout.ROW, Layout.ROW, 8, 8)
    found, refused = candidates(problem, d)
    assert found and all(isinstance(a.selection, Selection) for a in found)
    assert all(a.name in candidate_names() for a in found)
    assert all(isinstance(why, str) and why for why in refused.values())


def test_a_crashing_tuning_space_is_a_refusal(monkeypatch, opencl_engine):
    class Crashing(REGISTRY["simple_unit"]):
        name = "crashing_space_test"

        def tuning_space(self, problem, dialect):
            raise RuntimeError("boom")
    monkeypatch.setattr(space, "candidate_names", lambda exhaustive=False: ["simple_unit", "crashing_space_test"])
    monkeypatch.setattr(space, "REGISTRY", {"simple_unit": REGISTRY["simple_unit"], "crashing_space_test": Crashing})
    problem = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)
    found, refused = candidates(problem, opencl_engine.dialect)
    assert refused == {"crashing_space_test": "RuntimeError: boom"}
    assert found and all(a.name == "simple_unit" for a in found)
