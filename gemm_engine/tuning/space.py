"""Which algorithms and tilings the tuner times for a problem.

By default the contenders are the algorithms the heuristic ranks (``auto``'s members, with the
split-K members taken without auto's gate: where split-K pays is exactly what timing can tell)
and double buffering, each with its `Algorithm.tuning_space`. ``exhaustive`` adds every other
registered algorithm (the teaching compositions: simple, ordered, specialized, wmma, ...), which
are slower everywhere measured so far and cost a compile each.
"""
from __future__ import annotations

from ..algorithms.base import REGISTRY, Algorithm, AlgorithmFamily
from ..errors import SetupError

#: Algorithms timed by default, by registered name.
CONTENDERS = ("skinny", "skinny_split_k", "split_k_wgmma", "split_k_mma", "split_k_unit", "pipelined_wgmma",
              "pipelined_mma", "pipelined_dmma", "simple_unit", "double_buffering_unit")


def candidate_names(exhaustive: bool = False) -> list[str]:
    if not exhaustive:
        return [n for n in CONTENDERS if n in REGISTRY]
    extra = sorted(n for n, cls in REGISTRY.items()
                   if n not in CONTENDERS and not issubclass(cls, AlgorithmFamily))
    return [n for n in CONTENDERS if n in REGISTRY] + extra


def candidates(problem, dialect, exhaustive: bool = False) -> tuple[list[Algorithm], dict[str, str]]:
    """(algorithms with a selection each, {name: reason} of the algorithms that refuse the problem)."""
    found, refused = [], {}
    for name in candidate_names(exhaustive):
        cls = REGISTRY[name]
        try:
            space = cls().tuning_space(problem, dialect)
            cls().setup(problem, dialect)          # the heuristic tiling must set up at least
        except SetupError as exc:
            refused[name] = str(exc)
            continue
        found += [cls(selection) for selection in space]
    return found, refused
