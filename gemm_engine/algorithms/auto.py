"""``auto``: the engine's default choice, the first rule of algorithms/rules.py that applies and
sets up. The order and the reasons live in `rules.RULES`; this module only evaluates them.

`decide` walks the rules and records a `Verdict` per rule (chosen; not chosen, with the rule's
reason; refused, with the SetupError; ranked lower, when an earlier rule won): ``auto`` uses the
first choice, `engine.explain` the whole trace.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import REGISTRY, AlgorithmFamily, KernelConfig, register
from ..selector.rules import RULES, Rule


@dataclass(frozen=True)
class Verdict:
    name: str          # the rule's algorithm (a family's chosen member as "family -> member")
    verdict: str       # "chosen", "not chosen", "refused", "ranked lower"
    reason: str
    config: KernelConfig | None = None


def decide(members, problem: MatmulProblem, dialect: Dialect, everything: bool = False):
    """(member, config, verdicts): the first of ``members`` (one per rule of `RULES`, in order) whose
    rule applies and that sets up, and a verdict for each rule looked at (all of them when
    ``everything``: explain wants to know what the later ones would do)."""
    chosen, verdicts = None, []
    for rule, member in zip(RULES, members):
        if chosen is not None and not everything:
            break
        reason = rule.when(problem, dialect)
        try:
            cfg = member.setup(problem, dialect)
        except SetupError as exc:
            verdicts.append(Verdict(rule.algorithm, "refused", str(exc)))
            continue
        concrete = member.chosen(cfg)
        name = rule.algorithm if concrete.name == rule.algorithm else f"{rule.algorithm} -> {concrete.name}"
        if reason is not None:
            verdicts.append(Verdict(name, "not chosen", f"its rule says no here: {reason}", cfg))
        elif chosen is None:
            chosen = (concrete, cfg)
            verdicts.append(Verdict(name, "chosen", f"auto's first rule that applies and sets up: {rule.why}", cfg))
        else:
            verdicts.append(Verdict(name, "ranked lower", f"sets up, but auto takes {chosen[0].name} first "
                                                          f"({rule.why})", cfg))
    if chosen is None:
        return None, None, verdicts
    return chosen[0], chosen[1], verdicts


@register
class AutoAlgorithm(AlgorithmFamily):
    name = "auto"

    def __init__(self, selection=None, **overrides):
        if selection is not None or overrides:
            raise TypeError("auto chooses each member's tiling itself; name an algorithm to give one")
        self.selection, self.overrides = None, {}
        self.members = [REGISTRY[rule.algorithm]() for rule in RULES]

    @property
    def rules(self) -> tuple[Rule, ...]:
        return RULES

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        _, cfg, verdicts = decide(self.members, problem, dialect)
        if cfg is None:
            raise SetupError(self.name, "no rule's algorithm can run this problem: "
                             + "; ".join(f"{v.name}: {v.reason}" for v in verdicts))
        return cfg
