"""What the tiling modules of the selector share: counting a problem's output tiles, and a list of
presets without repeats (the tuner times each once)."""
from __future__ import annotations

from ..problem import MatmulProblem


def tile_count(problem: MatmulProblem, tile_m: int, tile_n: int) -> int:
    """Output tiles (cubes of a non-persistent grid) of ``tile_m`` x ``tile_n`` over all batch entries."""
    return problem.batch * -(-problem.m // tile_m) * -(-problem.n // tile_n)


def distinct(selections) -> list:
    """``selections`` without repeats, in order (the tuner times each once)."""
    out = []
    for s in selections:
        if s not in out:
            out.append(s)
    return out
