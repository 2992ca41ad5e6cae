"""The choose step: which algorithm a call runs, and a trace of why.

One policy for every caller (matmul, explain, the tuner, the CLI): the caller's algorithm when one
is given; else the tuning cache's entry for the problem's class (tuning/key.py) when there is one
and it sets up; else ``auto``, the first rule of selector/rules.py that applies and sets up. A
family name (``"specialized"``) resolves to its best member that runs here: the `Choice` keeps the
family's name beside the member. It records where the choice came from and, when asked
(``trace=True``), a verdict for every rule and every other registered algorithm (a family: the
member it resolves to here): explain prints it.

A user's algorithm never breaks the choice of another: whatever its setup raises is reported as a
refusal with the exception (`SetupError` with ``internal`` set), not raised.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..algorithms.auto import Verdict, decide
from ..algorithms.base import REGISTRY, Algorithm, KernelConfig, resolve
from ..algorithms.family import AlgorithmFamily, refusal_text
from ..selector.rules import FAMILY_NOTE, RULES, unranked_reason
from ..errors import SetupError
from ..problem import MatmulProblem


@dataclass(frozen=True)
class Choice:
    algorithm: Algorithm          # the concrete algorithm that runs
    config: KernelConfig
    source: str                   # "caller", "tuning cache" or "heuristic"
    trace: tuple[Verdict, ...] = ()
    #: The family the caller (or the tuning cache) named, when it resolved to ``algorithm``.
    family: str | None = None


def _named(alg: Algorithm, cfg: KernelConfig, source: str) -> Choice:
    """The choice of a named algorithm, a family's resolved to its member."""
    member = alg.chosen(cfg)
    return Choice(member, cfg, source, family=alg.name if member is not alg else None)


def try_setup(alg: Algorithm, problem: MatmulProblem, dialect) -> tuple[KernelConfig | None, SetupError | None]:
    """(config, None) or (None, the refusal): any exception of a component becomes a refusal."""
    try:
        return alg.setup(problem, dialect), None
    except SetupError as exc:
        return None, exc
    except Exception as exc:  # noqa: BLE001 -- a user's algorithm must not break the choice
        return None, SetupError(getattr(alg, "name", type(alg).__name__),
                                f"setup raised {type(exc).__name__}: {exc}", internal=True)


class ChoicePolicy:
    """Chooses for one engine: ``dialect`` to set up with, ``tuned(problem)`` the tuning cache's
    algorithm for a problem's class (or None), ``resolve(spec)`` an algorithm instance for a
    caller's name, class or instance."""

    def __init__(self, dialect, tuned, resolve_algorithm=resolve):
        self.dialect = dialect
        self.tuned = tuned
        self.resolve = resolve_algorithm

    def choose(self, problem: MatmulProblem, algorithm=None, trace: bool = False) -> Choice:
        dialect = self.dialect
        verdicts: list[Verdict] = []
        if algorithm is not None:
            alg = self.resolve(algorithm)
            cfg = alg.setup(problem, dialect)      # a refusal is the caller's answer: raised
            choice = _named(alg, cfg, "caller")
            return self._traced(choice, problem, alg) if trace else choice
        tuned = self.tuned(problem)
        if tuned is not None:
            cfg, err = try_setup(tuned, problem, dialect)
            if cfg is not None:
                choice = _named(tuned, cfg, "tuning cache")
                return self._traced(choice, problem, tuned) if trace else choice
            verdicts.append(Verdict(tuned.name, "refused", f"tuning cache entry for this class does not "
                                                           f"set up here ({err}); the heuristic decides"))
        auto = self.resolve("auto")
        member, cfg, rule_verdicts = decide(auto.members, problem, dialect, everything=trace)
        if cfg is None:
            raise SetupError("auto", "no rule's algorithm can run this problem: "
                             + "; ".join(f"{v.name}: {v.reason}" for v in rule_verdicts))
        choice = Choice(member, cfg, "heuristic", tuple(verdicts + rule_verdicts))
        return self._traced(choice, problem, ruled=True) if trace else choice

    def _traced(self, choice: Choice, problem: MatmulProblem, named: Algorithm | None = None,
                ruled: bool = False) -> Choice:
        """``choice`` with a verdict for the family ``named`` resolved from (if it is one), every
        rule (unless already there) and every other registered algorithm."""
        verdicts = list(choice.trace)
        if choice.family is not None:
            verdicts.append(self._family_verdict(named, problem, f"named by the {choice.source}"))
        if not ruled:
            _, _, rule_verdicts = decide(self.resolve("auto").members, problem, self.dialect, everything=True)
            for v in rule_verdicts:
                concrete = v.name.split(" -> ")[-1]
                if concrete == choice.algorithm.name and v.config is not None:
                    v = Verdict(v.name, "chosen", f"named by the {choice.source}", v.config)
                elif v.verdict == "chosen":
                    v = Verdict(v.name, "ranked lower", f"the heuristic's choice, overridden by the "
                                                        f"{choice.source}", v.config)
                verdicts.append(v)
        seen = {v.name.split(" -> ")[0] for v in verdicts} | {r.algorithm for r in RULES}
        seen |= {m.name for r in RULES for m in _members(REGISTRY.get(r.algorithm))}
        for name, cls in sorted(REGISTRY.items()):
            if name in seen or name == "auto":
                continue
            try:
                alg = cls()
            except Exception as exc:  # noqa: BLE001 -- a user class that cannot even be built
                verdicts.append(Verdict(name, "refused", f"{name}: could not be built: {type(exc).__name__}: {exc}"))
                continue
            if isinstance(alg, AlgorithmFamily):
                verdicts.append(self._family_verdict(alg, problem, FAMILY_NOTE))
                continue
            cfg, err = try_setup(alg, problem, self.dialect)
            if cfg is None:
                verdicts.append(Verdict(name, "refused", str(err)))
            elif name == choice.algorithm.name:
                verdicts.append(Verdict(name, "chosen", f"named by the {choice.source}", cfg))
            else:
                verdicts.append(Verdict(name, "not ranked", unranked_reason(name), cfg))
        return Choice(choice.algorithm, choice.config, choice.source, tuple(verdicts), choice.family)

    def _family_verdict(self, family: AlgorithmFamily, problem: MatmulProblem, why: str) -> Verdict:
        """"family -> member": the member ``family`` resolves to here, and why the better ones do not."""
        try:
            member, cfg, trace = family.resolve_member(problem, self.dialect)
        except Exception as exc:  # noqa: BLE001 -- a user's family must not break the trace
            return Verdict(family.name, "family", f"{why}; resolving it raised {type(exc).__name__}: {exc}")
        if member is None:
            return Verdict(family.name, "family", f"{why}; none of its members runs here: {refusal_text(trace)}")
        passed = [v for v in trace if v.verdict != "chosen"]
        before = f"; passed by: {refusal_text(passed)}" if passed else ""
        return Verdict(f"{family.name} -> {member.name}", "family",
                       f"{why}; resolves here to {member.name}, its best member that runs{before}", cfg)


def _members(cls):
    if cls is None or not issubclass(cls, AlgorithmFamily):
        return []
    try:
        return cls().members
    except Exception:  # noqa: BLE001
        return []
