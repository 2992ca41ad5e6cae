"""Families: one registered name for several compositions, and the walk that picks one.

`rank` walks (rule, member) pairs in order and takes the first member whose rule's condition
holds and that sets up, recording a `Verdict` for each it looks at: ``auto`` (auto.py) walks the
rule table with it, `AlgorithmFamily` its members' table (selector/families.py), explain both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..selector.rules import Rule
from .base import Algorithm, KernelConfig


@dataclass(frozen=True)
class Verdict:
    name: str          # the rule's algorithm (a family's chosen member as "family -> member")
    verdict: str       # "chosen", "not chosen", "refused", "ranked lower"
    reason: str
    config: KernelConfig | None = None


def rank(entries, problem: MatmulProblem, dialect: Dialect, owner: str, pick: str, everything: bool = False,
         fallback: bool = False):
    """(member, config, verdicts) for ``entries``, (rule, member) pairs in order: the first member
    whose rule's ``when`` says nothing against it and that sets up, and a verdict for each entry
    looked at (all of them when ``everything``). With ``fallback``, when no such member exists,
    the first that sets up although its rule says no (then marked chosen). ``owner`` names the
    chooser in the reasons ("auto", "the simple family"), ``pick`` says what the chosen one is."""
    chosen, verdicts, declined = None, [], []
    for rule, member in entries:
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
            declined.append((len(verdicts) - 1, concrete, cfg, reason))
        elif chosen is None:
            chosen = (concrete, cfg)
            verdicts.append(Verdict(name, "chosen", f"{pick}: {rule.why}", cfg))
        else:
            verdicts.append(Verdict(name, "ranked lower", f"sets up, but {owner} takes {chosen[0].name} first "
                                                          f"({rule.why})", cfg))
    if chosen is None and fallback and declined:
        at, concrete, cfg, reason = declined[0]
        chosen = (concrete, cfg)
        verdicts[at] = Verdict(verdicts[at].name, "chosen", f"its rule says no here ({reason}), but no other "
                                                            f"member of {owner} runs here", cfg)
    if chosen is None:
        return None, None, verdicts
    return chosen[0], chosen[1], verdicts


def refusal_text(verdicts) -> str:
    """The verdicts' reasons as one line (each refusal names its member once)."""
    return "; ".join(f"{v.name}: {v.reason.removeprefix(v.name + ': ')}" for v in verdicts)


class AlgorithmFamily(Algorithm):
    """One name for several compositions: setup takes the best member that sets up.

    ``variants`` are the member classes, best first; ``member_rules`` (selector/families.py) may
    give a member a condition (`Rule.when`): a member whose condition says no is tried after every
    other. E.g. "simple" = (tensor-core variants, register variant): f16 on an sm_80+ GPU gets
    tensor cores, float64 or OpenCL gets register FMA. A whole selection passed by the caller goes
    only to the variants whose selection type it is (else to those whose type has all its fields);
    overrides go to the variants that have those fields. When no variant takes them, a TypeError says so; when none sets up, the SetupError
    lists every variant's reason.
    """

    is_family = True
    variants: ClassVar[tuple[type[Algorithm], ...]] = ()
    member_rules: ClassVar[tuple[Rule, ...]] = ()

    def __init__(self, selection=None, **overrides):
        if isinstance(selection, Mapping):
            overrides, selection = {**selection, **overrides}, None
        self.selection, self.overrides = selection, dict(overrides)
        self.members = []
        for v in self._takers(selection):
            target = _safe_selection_class(v)
            if overrides and (target is None or not set(overrides) <= set(target.field_names())):
                continue
            self.members.append(v(selection, **overrides))
        if not self.members:
            what = type(selection).__name__ if selection is not None else f"overrides {sorted(overrides)}"
            raise TypeError(f"{self.name}: no variant takes {what}; variants: "
                            f"{[v.name for v in self.variants]}")

    @classmethod
    def check(cls) -> None:
        return None   # each member checks its own composition

    def _takers(self, selection) -> list[type[Algorithm]]:
        """The variants a caller's whole selection goes to: those whose selection type it is, else
        (none is) those whose type has every field it has (a `UnitSelection` for the register
        member of "specialized", whose selection adds ``load_units``)."""
        if selection is None:
            return list(self.variants)
        targets = [(v, _safe_selection_class(v)) for v in self.variants]
        exact = [v for v, t in targets if t is not None and isinstance(selection, t)]
        fields = set(type(selection).field_names())
        return exact or [v for v, t in targets if t is not None and fields <= set(t.field_names())]

    def entries(self) -> list[tuple[Rule, Algorithm]]:
        """(rule, member) per member, best first (a member without a rule: always a candidate)."""
        rules = {r.algorithm: r for r in self.member_rules}
        return [(rules.get(m.name) or Rule(m.name, "a member of the family"), m) for m in self.members]

    def resolve_member(self, problem: MatmulProblem, dialect: Dialect, everything: bool = False):
        """(member, config, verdicts): the member a setup takes here (None when none runs)."""
        return rank(self.entries(), problem, dialect, f"the {self.name} family",
                    f"the {self.name} family's best member that runs here", everything, fallback=True)

    def setup(self, problem: MatmulProblem, dialect: Dialect) -> KernelConfig:
        _, cfg, verdicts = self.resolve_member(problem, dialect)
        if cfg is None:
            raise SetupError(self.name, "no variant can run this problem: " + refusal_text(verdicts))
        return cfg

    def chosen(self, cfg: KernelConfig) -> Algorithm:
        for member in self.members:
            cls = type(member)
            if cfg.algorithm == f"{cls.__module__}.{cls.__qualname__}":
                return member
            if isinstance(member, AlgorithmFamily):   # a family of families: ask it
                try:
                    return member.chosen(cfg)
                except ValueError:
                    pass
        raise ValueError(f"{self.name}: config {cfg.algorithm} is not one of this family's")

    def render(self, cfg, dialect):
        return self.chosen(cfg).render(cfg, dialect)

    def signature(self, cfg):
        return self.chosen(cfg).signature(cfg)

    def cube_count(self, cfg, problem):
        return self.chosen(cfg).cube_count(cfg, problem)

    def launches(self, cfg, problem):
        return self.chosen(cfg).launches(cfg, problem)

    def workspace(self, cfg, problem):
        return self.chosen(cfg).workspace(cfg, problem)

    def kept_workspace(self, cfg, problem):
        return self.chosen(cfg).kept_workspace(cfg, problem)

    def call_values(self, cfg, problem):
        return self.chosen(cfg).call_values(cfg, problem)

    def tuning_space(self, problem, dialect):
        return []


def _safe_selection_class(cls):
    try:
        return cls.selection_class
    except SetupError:
        return None
