"""``auto``: the engine's default choice, the first rule of selector/rules.py that applies and
sets up. The order and the reasons live in `rules.RULES`; this module only evaluates them.

`decide` walks the rules (family.py's `rank`) and records a `Verdict` per rule (chosen; not chosen,
with the rule's reason; refused, with the SetupError; ranked lower, when an earlier rule won):
``auto`` uses the first choice, `engine.explain` the whole trace.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..selector.rules import RULES, Rule
from .base import REGISTRY, KernelConfig, register
from .family import AlgorithmFamily, Verdict, rank, refusal_text  # noqa: F401  (Verdict: choose.py's)


def decide(members, problem: MatmulProblem, dialect: Dialect, everything: bool = False):
    """(member, config, verdicts): the first of ``members`` (one per rule of `RULES`, in order) whose
    rule applies and that sets up, and a verdict for each rule looked at (all of them when
    ``everything``: explain wants to know what the later ones would do)."""
    return rank(zip(RULES, members), problem, dialect, "auto", "auto's first rule that applies and sets up",
                everything)


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

    def resolve_member(self, problem: MatmulProblem, dialect: Dialect, everything: bool = False):
        return decide(self.members, problem, dialect, everything)

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        _, cfg, verdicts = decide(self.members, problem, dialect)
        if cfg is None:
            raise SetupError(self.name, "no rule's algorithm can run this problem: "
                             + "; ".join(f"{v.name}: {v.reason}" for v in verdicts))
        return cfg
