"""What the tiling modules of the selector share: counting a problem's output tiles, a list of
presets without repeats (the tuner times each once), and fitting a ring of stages into a device's
shared memory (NVIDIA's OpenCL driver gives a work-group 48 KiB)."""
from __future__ import annotations

from ..problem import Layout, MatmulProblem


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


def ring_bytes(problem: MatmulProblem, stage_m: int, stage_n: int, stage_k: int, stages: int, size: int,
               pad: int) -> int:
    """Shared memory of a ring of ``stages`` slots of both operands (``size``-byte elements, rows
    padded by ``pad`` elements), stored as chunk loaders store them: in their global layout (rows
    along k for a row-major lhs and a column-major rhs)."""
    lhs = stage_m * (stage_k + pad) if Layout(problem.lhs_layout) is Layout.ROW else stage_k * (stage_m + pad)
    rhs = stage_n * (stage_k + pad) if Layout(problem.rhs_layout) is Layout.COL else stage_k * (stage_n + pad)
    return stages * (lhs + rhs) * size


def fit_ring(problem: MatmulProblem, preset: dict, stage_m: int, stage_n: int, size: int, pad: int, limit: int,
             tile_k: int) -> dict | None:
    """``preset`` (``stage_k``, ``stages``) with fewer slots (not below 2), then a shorter stage_k (not
    below ``tile_k``), until its ring fits ``limit`` bytes; None when nothing does. A preset that
    carries fragments keeps three slots and an even k-tile count, or stops carrying."""
    sel = dict(preset)
    while ring_bytes(problem, stage_m, stage_n, sel["stage_k"], sel["stages"], size, pad) > limit:
        if sel["stages"] > 2:
            sel["stages"] -= 1
        elif sel["stage_k"] // 2 >= tile_k:
            sel["stage_k"] //= 2
        else:
            return None
    if sel.get("carry_fragments") and (sel["stages"] < 3 or (sel["stage_k"] // tile_k) % 2):
        sel.pop("carry_fragments")
    return sel
