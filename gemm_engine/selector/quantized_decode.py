"""The quantized decode kernel's tiling by problem (algorithms/quantized_decode.py) and whether one
launch of it fills the device (else the rule takes its split-K form: rules.py).

What bounds it (bench/SELECTION_NOTES.md, "Quantized decode"): at M <= 16 the first H100 run's
times grow with the weight's bytes at 2.9 TB/s but start from about 8 us (int4 4096 x 4096: 11.3 us
for 8.9 MB; 14336 x 4096: 19.0 us for 31.2 MB), cuBLAS's from about 6.6: the fixed part is the
kernel's structure, not its bandwidth. Split K into 5 ranges, each plane ran two rounds of loads
then multiplies in lock step with every other plane, and the last cube of a tile waited on a
device-wide fence and an atomic before adding the ranges. So where the output's columns alone give
about a cube per multiprocessor, the kernel runs in one launch (no fixup) with more planes per cube.
Measured since: the kernel is bound by the instructions it issues a weight byte (pairs of codes
dequantized in few: codegen/ptx_dequant.py), and one register buffer with long blocks beats two
buffers of half blocks (global_/quantized_decode_config.py `default_prefetch`).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.quantized_decode_config import MAX_M_TILES, STEP_WORDS
from ..problem import MatmulProblem

#: Rows of x per cube (8-row tiles).
DECODE_ROWS = 8 * MAX_M_TILES
#: M tiles up to which the one-launch tilings apply (their registers: 125 at M = 1, 168 at M = 16).
ONE_LAUNCH_MAX_M_TILES = 2
#: Share of the compute units that 32-column cubes must cover for one launch (4096 columns: 128
#: cubes on 132 multiprocessors).
ONE_LAUNCH_FILL = 0.9
#: Rows of K a 16-plane block holds where the cubes outnumber the compute units
#: (bench/SELECTION_NOTES.md, "Quantized decode": int4 6144 x 4096 M = 8 9.4 us at 64 rows against
#: 10.8 at 128; 8192 x 8192 M = 1 15.9 / 18.0; fp8 6144 x 4096 M = 8 13.0 at 64 against 16.0).
BLOCK_ROWS = 64


def strips(problem: MatmulProblem, columns: int) -> int:
    """Cubes of ``columns`` output columns (and up to `DECODE_ROWS` rows)."""
    return problem.batch * -(-problem.n // columns) * -(-problem.m // DECODE_ROWS)


def decode_preset(problem: MatmulProblem, dialect: Dialect) -> dict:
    """quantized_decode's tiling (knobs): 64-column cubes of 8 planes where they give every compute
    unit one; else 32-column cubes of 16 planes where those nearly do; else the level's defaults."""
    units = max(1, dialect.device.compute_units)
    if -(-problem.m // 8) > ONE_LAUNCH_MAX_M_TILES or problem.weights is None:
        return {}
    if strips(problem, 64) >= units:
        return {"planes": 8}
    if strips(problem, 32) >= ONE_LAUNCH_FILL * units:
        # int4: cubes at most one a compute unit take 4 steps a block (fewer loops, registers spare),
        # more cubes 64 rows of K (fewer registers, more cubes resident). 8-bit codes (16 rows a
        # step): 64 rows by pairs of per-column codes (measured), else 2 steps as before (the float
        # path spills at 4 steps; ptxas gives grouped fp8 64 registers there).
        w = problem.weights
        if w.per_word == 8:
            unroll = 4 if strips(problem, 32) <= units else BLOCK_ROWS // (STEP_WORDS * w.per_word)
        else:
            pairs = dialect.supports("dequant_pair") and w.scale_type == problem.lhs and not w.group_size
            unroll = BLOCK_ROWS // (STEP_WORDS * w.per_word) if pairs else 2
        return {"planes": 16, "column_loads": 1, "unroll": unroll}
    return {}


def one_launch_fills(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """Why one launch of quantized_decode fills the device (None: it does not, split K)."""
    units = max(1, dialect.device.compute_units)
    wide = strips(problem, 64)
    if wide >= 2 * units:
        return f"{wide} cubes of 64 columns already give every compute unit two"
    preset = decode_preset(problem, dialect)
    if preset:
        columns = 32 * preset.get("column_loads", 2)
        return (f"{strips(problem, columns)} cubes of {columns} columns and {preset['planes']} planes give about "
                f"every compute unit one: one launch, no K ranges to add")
    return None
