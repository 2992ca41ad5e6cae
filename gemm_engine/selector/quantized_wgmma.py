"""The quantized wgmma kernel's tiling by problem (algorithms/quantized_wgmma.py) and whether its
split-K form should take it, from the H100 measurements in bench/SELECTION_NOTES.md, "Quantized
wgmma" (int4 group 128 prepacked, bf16, graph replay; 4096 x 4096, 14336 x 4096 and 4096 x 14336
at M = 32 to 2048; 8-bit codes at a few):

* one warpgroup a cube (64 columns) unless a cube takes over 128 rows of x and two-warpgroup cubes still
  give about every compute unit one: with fewer units a cube, more cubes are resident and one
  cube's conversion overlaps another's products (M = 128: 25.9 us against 40.4 at 4096 x 4096);
  at 256 rows a cube holds 145 KiB of ring, one a unit, and two warpgroups keep its tensor cores
  busier (14336 x 4096 M = 256: 58.2 against 76.8);
* over 128 rows whose two-warpgroup cubes leave units idle: 128-row cubes of one warpgroup
  (4096 x 4096 M = 256: 26.5 us against 32.8; held out, 8192 x 8192 M = 200 about 82 against
  129 split), unless even those leave units idle over a long K (>= `LONG_K`): then two
  warpgroups and K in 4 ranges (4096 x 14336 M = 256: 86.9 against 109.8);
* K in 4 ranges (split-K) where the cubes cover under half the units and K is long (4096 x 14336
  M = 64: 41.5 us against 89.2; 2 ranges 57.9, 8 ranges slower); never over a short K, whose
  ranges' fixup costs more than the idle units (4096 x 4096 M = 64: 22.1 against 20.6 unsplit);
* 128 rows of K a slot (``block_k``: half the barriers and waits a row of K) for cubes of up to
  128 rows: 4096 x 4096 M = 64 17.9 us against 21.1, 14336 x 4096 M = 64 29.1 against 32.5; at
  128 rows with three slots (14336 x 4096 M = 128: 38.6 against 43.0; four slots 50.6, the
  registers of 128 rows leaving fewer cubes resident).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.quantized_wgmma_config import A_ROWS, default_tokens
from ..problem import Layout, MatmulProblem

#: Two-warpgroup cubes with a producer warpgroup issuing the copies (global_/quantized_wgmma_roles.py;
#: H200, int4 g128, graph replay, against the copying form: 14336 x 4096 M = 256 52.2 us with 128
#: rows of K a slot against 57.4; 4096 x 14336 M = 256 split in 4 75.9 against 86.5; M = 1024 at
#: 4096 x 4096 52.1 against 57.3 (the dequantizing pass: 62.3), 4096 x 14336 175.7 against 188.4 (197.6)).
PRODUCER = {"producer": 1}
#: Cubes of up to 128 rows: two warpgroups with the producer and 128 rows of K a slot (4 slots)
#: where such cubes cover `NARROW_PRODUCER_FILL` of the units, and in the split form (H200, int4 g128,
#: graph replay, against one warpgroup: 14336 x 4096 M = 64 25.0 us against 26.2, M = 128 34.7
#: against 36.3; 11008 x 4096 M = 64 (0.65 of the units) 25.0 against 26.5; 28672 x 4096 M = 128 70.4
#: against 78.0, M = 64 57.4 against 56.9; split in 4: 4096 x 14336 M = 64 30.8 against 35.1, M = 128
#: 44.8 against 60.7, 4096 x 11008 M = 64 26.3 against 30.4). Not with fewer cubes (8192 x 8192
#: M = 64: 64 cubes, 47.4 against 36.9; 4096 x 4096 M = 128: 33.6 against 22.7), nor in one launch for
#: 8-bit codes (held out: int8 14336 x 4096 M = 64 30.9 against 30.1, fp8 11008 x 4096 31.8 against
#: 30.5; their split form gains: int8 4096 x 14336 M = 128 48.4 against 58.6). Held out, int4: 22016 x
#: 4096 M = 96 62.4 against 74.5, 10240 x 4096 M = 128 34.8 / 37.0, 13824 x 5120 M = 48 31.6 / 35.7,
#: 4096 x 14336 M = 100 (split) 44.2 / 59.1; level: 4096 x 28672 M = 64 59.2 / 59.7, 2048 x 8192 M = 128
#: 32.9 / 32.3.
NARROW_PRODUCER = {"warpgroups": 2, **PRODUCER, "block_k": 128, "stages": 4}
NARROW_PRODUCER_FILL = 0.6
#: Share of the compute units two-warpgroup cubes of 256 rows must cover to be chosen.
WIDE_FILL = 0.8
#: Cubes below this share of the compute units take the split-K form (over a long K).
SPLIT_BELOW = 0.5
#: K from which cutting it into ranges pays, and how many ranges.
LONG_K, SPLITS = 8192, 4
#: Rows of M from which the tiled kernel takes over from the decode kernel (held out: 28672 x 4096
#: M = 48 57.5 us against 78.8; below, 4096 x 4096 M = 40 22.1 against 18.3 and 14336 x 4096
#: M = 32 27.9 against 25.4), and past which the dequantizing pass and the dense kernel win (M =
#: 1024: 232.7 us against 227.6 at 14336 x 4096); between `WAVE_M` and `MAX_M` only where the
#: producer form's two-warpgroup cubes are one wave (`past_512_loses`).
MIN_M, WAVE_M, MAX_M = 48, 512, 1024


def _cubes(problem: MatmulProblem, tokens: int, warpgroups: int) -> int:
    return problem.batch * -(-problem.m // tokens) * -(-problem.n // (A_ROWS * warpgroups))


def _tokens(problem: MatmulProblem, preset: dict) -> int:
    return preset.get("tokens") or default_tokens(problem.m, 64 if Layout(problem.lhs_layout) is Layout.COL else 32)


def _long_blocks(problem: MatmulProblem, preset: dict, stages: int | None = None) -> dict:
    """``preset`` with 128 rows of K a slot (and ``stages`` slots) where the groups allow it."""
    g = problem.weights.group_size if problem.weights is not None else 0
    if g and 128 % g and g % 128:
        return preset
    return {**preset, "block_k": 128, **({"stages": stages} if stages else {})}


def wgmma_preset(problem: MatmulProblem, dialect: Dialect, narrow: bool = True) -> dict:
    """quantized_wgmma's knobs (the module docstring): ``warpgroups``, ``tokens`` where the level's
    own (all of M's rows, up to 256) is not taken, and 128 rows of K a slot for cubes of up to 128
    rows (three slots at 128); ``narrow``: `NARROW_PRODUCER` where it applies (measured on dense
    problems only: a grouped level's cubes take their tokens from the whole M, where these 128-row
    cubes' four slots would not fit)."""
    units = max(1, dialect.device.compute_units)
    tokens = _tokens(problem, {})
    four_bit = problem.weights is not None and problem.weights.per_word == 8
    producer = PRODUCER if producer_reads(problem) else {}
    if narrow and producer and tokens <= 128 and four_bit and "block_k" in _long_blocks(problem, {}) and \
            _cubes(problem, tokens, 2) >= NARROW_PRODUCER_FILL * units:
        return NARROW_PRODUCER
    if tokens <= 64:
        return _long_blocks(problem, {"warpgroups": 1})
    if tokens <= 128:
        return _long_blocks(problem, {"warpgroups": 1}, stages=3)
    if _cubes(problem, tokens, 2) >= WIDE_FILL * units:
        # 128 rows of K a slot for 4-bit codes (three slots of 8-bit codes' words do not fit).
        wide = {"warpgroups": 2, **producer}
        return _long_blocks(problem, wide, stages=3) if four_bit and producer else wide
    if problem.k >= LONG_K and _cubes(problem, 128, 1) < units:
        return {"warpgroups": 2, **producer}      # the split form's
    return _long_blocks(problem, {"tokens": 128, "warpgroups": 1}, stages=3)


def split_preset(problem: MatmulProblem, dialect: Dialect) -> dict:
    """quantized_wgmma_split_k's knobs: `wgmma_preset`'s and `SPLITS` K ranges; 64 rows of K a slot
    past 64 rows of M (4096 x 14336 M = 128: 61.1 us against 88.5 at 128)."""
    preset = wgmma_preset(problem, dialect)
    if producer_reads(problem) and _tokens(problem, {}) <= 128 and "block_k" in _long_blocks(problem, {}):
        return {**NARROW_PRODUCER, "split_k": SPLITS}
    if _tokens(problem, preset) > 64:
        preset = {k: v for k, v in preset.items() if k not in ("block_k", "stages")}
    return {**preset, "split_k": SPLITS}


def split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """Why one launch of quantized_wgmma's cubes is taken (None: split K instead)."""
    if problem.k < LONG_K:
        return f"K = {problem.k} < {LONG_K}: the ranges' fixup costs more than idle units"
    preset = wgmma_preset(problem, dialect)
    cubes = _cubes(problem, _tokens(problem, preset), preset["warpgroups"])
    units = max(1, dialect.device.compute_units)
    if cubes >= SPLIT_BELOW * units:
        return f"{cubes} cubes cover at least {SPLIT_BELOW:.0%} of the {units} compute units: one launch"
    return None


def producer_reads(problem: MatmulProblem) -> bool:
    """Whether the producer warpgroup can copy x: its rows 4-byte aligned (else x goes through the
    copying units' registers, which only the copying form has)."""
    return problem.vector_align("lhs") * problem.lhs.itemsize >= 4


def past_512_loses(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """Why quantized_wgmma should not take a problem of more than `WAVE_M` rows (None: it should):
    there only the producer form's cubes of 256 rows in one wave beat the dequantizing pass and the
    dense kernel (4096 x 4096 and 4096 x 14336 M = 1024: 128 cubes, 52.1 / 175.7 us against 62.3 /
    197.6); over more waves the dense kernel's tiles win (14336 x 4096 M = 1024, 448 cubes: 216.4
    against 209.9)."""
    if problem.m <= WAVE_M:
        return None
    if not producer_reads(problem):
        return f"M = {problem.m} > {WAVE_M} with x's rows not 4-byte aligned: no producer form, the dequantizing pass"
    units = max(1, dialect.device.compute_units)
    cubes = _cubes(problem, 256, 2)
    if WIDE_FILL * units <= cubes <= units:
        return None
    return (f"M = {problem.m} > {WAVE_M} with {cubes} cubes of 256 rows, not one wave of the {units} compute units: "
            f"the dequantizing pass and the dense kernel")


def past_256_loses(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """Why quantized_wgmma should not take a problem of more than 256 rows whose two-warpgroup
    cubes leave units idle over a long K (its split form there: 4096 x 14336 M = 512 205 us against
    the dequantizing pass and dense kernel's 159), or None."""
    if problem.m <= 256 or problem.k < LONG_K:
        return None
    units = max(1, dialect.device.compute_units)
    if _cubes(problem, 256, 2) >= WIDE_FILL * units:
        return None
    return (f"M = {problem.m} over a long K with {_cubes(problem, 256, 2)} cubes: the dequantizing pass and the "
            f"dense kernel")
