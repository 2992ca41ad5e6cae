"""selector/families.py: the card's families, their members best first, and the family classes the
algorithms build from the table."""
from __future__ import annotations

from gemm_engine.algorithms import REGISTRY, AlgorithmFamily
from gemm_engine.selector.conditions import always, wgmma_worth_it
from gemm_engine.selector.families import FAMILIES


def test_the_card_families_and_their_order():
    assert set(FAMILIES) == {"simple", "double_buffering", "specialized", "ordered"}
    order = {name: [r.algorithm for r in rules] for name, rules in FAMILIES.items()}
    assert order["specialized"] == ["specialized_wgmma", "specialized_unit"]
    assert order["double_buffering"] == ["pipelined_wgmma", "pipelined_mma", "pipelined_dmma", "double_buffering_mma",
                                         "double_buffering_unit"]
    assert order["simple"] == ["simple_mma", "simple_dmma", "simple_unit"]
    assert order["ordered"] == ["ordered_unit"]
    # Every family ends with its register member: it runs every backend and dtype.
    assert all(rules[-1].algorithm.endswith("_unit") for rules in FAMILIES.values())


def test_conditions_are_the_rules_own():
    conditions = {r.algorithm: r.when for rules in FAMILIES.values() for r in rules}
    assert conditions["pipelined_wgmma"] is wgmma_worth_it
    assert all(when is always for name, when in conditions.items() if name != "pipelined_wgmma")


def test_each_family_name_is_a_registered_family_of_these_members():
    for name, rules in FAMILIES.items():
        cls = REGISTRY[name]
        assert issubclass(cls, AlgorithmFamily)
        assert [v.name for v in cls.variants] == [r.algorithm for r in rules]
        assert all(REGISTRY[r.algorithm] is v for r, v in zip(rules, cls.variants))   # reachable by their names
