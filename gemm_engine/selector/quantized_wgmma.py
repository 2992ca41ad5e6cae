"""The quantized wgmma kernel's tiling by problem (algorithms/quantized_wgmma.py) and whether its
split-K form should take it, from the H100 measurements in bench/SELECTION_NOTES.md, "Quantized
wgmma" (int4 group 128, graph replay; the shapes 4096 x 4096, 14336 x 4096, 4096 x 14336 at M = 32
to 2048):

* one warpgroup a cube (64 columns) unless a cube takes 256 rows of x and two-warpgroup cubes still
  give about every compute unit one: with fewer units a cube, more cubes are resident and one
  cube's conversion overlaps another's products (M = 128: 30.9 us against 43.8 at 4096 x 4096);
  at 256 rows a cube holds 145 KiB of ring, one a unit, and two warpgroups keep its tensor cores
  busier (14336 x 4096: 66.9 against 92.2);
* K cut into ranges (split-K) where the cubes cover under half the units: 4096 x 14336 M = 128
  64.6 us in 4 ranges against 124 in one.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.quantized_wgmma import default_tokens
from ..global_.quantized_wgmma_config import A_ROWS
from ..problem import Layout, MatmulProblem

#: Share of the compute units two-warpgroup cubes of 256 rows must cover to be chosen.
WIDE_FILL = 0.8
#: Cubes below this share of the compute units take the split-K form.
SPLIT_BELOW = 0.5
#: Most K ranges (each adds its partial tile through the fixup).
MAX_SPLITS = 4
#: Rows of M from which the tiled kernel takes over from the decode kernel (M = 32: 14336 x 4096
#: 31.2 us against 39.2), and past which the dequantizing pass and the dense kernel win (M = 1024:
#: 253.8 us against 225.7).
MIN_M, MAX_M = 32, 512


def _cubes(problem: MatmulProblem, tokens: int, warpgroups: int) -> int:
    return problem.batch * -(-problem.m // tokens) * -(-problem.n // (A_ROWS * warpgroups))


def wgmma_preset(problem: MatmulProblem, dialect: Dialect) -> dict:
    """quantized_wgmma's knobs: ``tokens`` (all of M's rows up to 256) and ``warpgroups`` (above);
    past 256 rows, 256-row cubes of two warpgroups where they cover the units (int4 14336 x 4096 M =
    512: 126.5 us against 145.4 at 128 rows), else 128-row ones (4096 x 4096: 44.9 against 56.1)."""
    units = max(1, dialect.device.compute_units)
    tokens = default_tokens(problem.m, 64 if Layout(problem.lhs_layout) is Layout.COL else 32)
    if tokens < 256:
        return {"warpgroups": 1}            # the level's own tokens: all of M's rows
    if _cubes(problem, 256, 2) >= WIDE_FILL * units:
        return {"warpgroups": 2}
    return {"tokens": 128, "warpgroups": 2} if problem.m > 256 else {"warpgroups": 1}


def _tokens(problem: MatmulProblem, preset: dict) -> int:
    return preset.get("tokens") or default_tokens(problem.m, 64 if Layout(problem.lhs_layout) is Layout.COL else 32)


def split_preset(problem: MatmulProblem, dialect: Dialect) -> dict:
    """quantized_wgmma_split_k's knobs: `wgmma_preset`'s and enough K ranges (at most `MAX_SPLITS`)
    for about a cube a compute unit."""
    preset = wgmma_preset(problem, dialect)
    cubes = _cubes(problem, _tokens(problem, preset), preset["warpgroups"])
    units = max(1, dialect.device.compute_units)
    return {**preset, "split_k": max(2, min(MAX_SPLITS, round(units / max(1, cubes))))}


def split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """Why one launch of quantized_wgmma's cubes fills the device (None: it does not, split K)."""
    preset = wgmma_preset(problem, dialect)
    cubes = _cubes(problem, _tokens(problem, preset), preset["warpgroups"])
    units = max(1, dialect.device.compute_units)
    if cubes >= SPLIT_BELOW * units:
        return f"{cubes} cubes cover at least {SPLIT_BELOW:.0%} of the {units} compute units: one launch"
    return None
