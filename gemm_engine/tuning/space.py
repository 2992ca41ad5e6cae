"""Which algorithms and tilings the tuner times for a problem.

By default the contenders are the algorithms the rules name (selector/rules.py: ``RULES``, with
a family's members each, and whatever ``when`` says: where split-K or the skinny split pays is
exactly what timing can tell) and the unranked ones marked ``tune``, each with its
`Algorithm.tuning_space`. ``exhaustive`` adds every other registered algorithm (the teaching
compositions: simple, ordered, specialized, wmma, a user's own...), slower everywhere measured so
far and a compile each.
"""
from __future__ import annotations

from ..algorithms.base import REGISTRY, Algorithm
from ..algorithms.family import AlgorithmFamily
from ..selector.rules import RULES, UNRANKED
from ..call.choose import try_setup


def _expand(name: str) -> list[str]:
    cls = REGISTRY.get(name)
    if cls is None:
        return []
    if issubclass(cls, AlgorithmFamily):
        return [m.name for m in cls().members]
    return [name]


def candidate_names(exhaustive: bool = False) -> list[str]:
    names = [n for r in RULES if r.tune for n in _expand(r.algorithm)]
    names += [n for u in UNRANKED if u.tune for n in _expand(u.algorithm)]
    names = list(dict.fromkeys(names))
    if exhaustive:
        names += sorted(n for n, cls in REGISTRY.items()
                        if n not in names and not issubclass(cls, AlgorithmFamily))
    return names


def candidates(problem, dialect, exhaustive: bool = False) -> tuple[list[Algorithm], dict[str, str]]:
    """(algorithms with a whole selection each, {name: reason} of the algorithms that refuse the
    problem, or whose own tiling rule failed)."""
    found, refused = [], {}
    for name in candidate_names(exhaustive):
        try:
            base = REGISTRY[name]()
            space = base.tuning_space(problem, dialect)
        except Exception as exc:  # noqa: BLE001 -- a user's algorithm must not stop tuning
            refused[name] = f"{type(exc).__name__}: {exc}"
            continue
        _, err = try_setup(base, problem, dialect)       # the heuristic tiling must set up at least
        if err is not None:
            refused[name] = str(err)
            continue
        for preset in space:
            try:
                found.append(base.with_selection(preset))
            except (TypeError, ValueError) as exc:
                refused[f"{name} {preset!r}"] = str(exc)
    return found, refused
