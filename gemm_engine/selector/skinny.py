"""Tilings of the skinny algorithms (M or N at most `MAX_ROWS`: a decode batch's activations times
a weight, or a weight times a few vectors): which axis the outputs run along and how many rows the
staged operand has, the skinny kernel's knobs left at 0 chosen for the problem and device
(`resolve_tiling`, so that a sweep may fix one knob and keep the rest), and skinny_split_k's split
of K over cubes. The kernel itself is global_/skinny.py; the measurements:
bench/SELECTION_NOTES.md, "Skinny tilings"."""
from __future__ import annotations

import math

from ..codegen.dialect import Dialect
from ..dtypes import WORD_BYTES
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from .base import distinct

#: Shared memory the staged vector may take: 32 KiB leaves room for several cubes per
#: multiprocessor and holds all of K = 8192 in float32 (one chunk: no barrier inside the K loop).
CHUNK_BYTES = 32 * 1024
#: Most vector elements each unit stages per chunk.
STAGING = 32
#: Most units per cube (fewer for short problems: small cubes, more of them).
UNITS = 256
#: Global loads in flight per unit: 8 x 16 bytes x 256 units = 32 KiB per cube.
UNROLL = 8
#: Most units sharing one output of a dot product (a plane's worth on GPUs).
LANES = 32
#: Most rows of the staged operand (M, or N when N is the short side): each unit keeps a sum per
#: row for each of its outputs, at most `MAX_ACCUMULATORS` in all.
MAX_ROWS, MAX_ACCUMULATORS = 16, 64
#: Dot products of several rows: outputs per unit, by rows (each staged vector read from shared
#: memory serves that many weight rows). 4 from 2 rows: bf16 2 x 4096 x 4096 11.8 us against 14.7
#: with one a unit; 8 rows 22.4 against 27.2 (2) and 42.1 (1); 8 x 14336 x 4096 59.8 against 82.4
#: and 146.9 (bench/SELECTION_NOTES.md, "Skinny rows"). One row keeps its measured GEMV tiling.
UNIT_OUTPUTS = ((1, 1), (MAX_ROWS, 4))
#: One-row 16-bit dot products on CUDA sm_90 (M = 1 against an nn.Linear weight; the tuner keeps the
#: other): 16 lanes an output (16 outputs a cube of 256 units) where that still gives every
#: multiprocessor a cube, else 32 (8 outputs)
#: (H200 kernels, us, 32 -> 16 lanes: 4096^2 10.0 -> 8.4, 4096 x 14336 32.9 -> 31.2, 8192^2 37.6 ->
#: 35.4; held out 4096 x 11008 29.1 -> 25.7, 7168 x 2048 10.5 -> 8.7, f16 3072^2 8.5 -> 6.6, 14336 x
#: 4096 33.9 -> 34.4, f16 6144 x 4096 16.1 -> 16.5; bench/SELECTION_NOTES.md "Skinny rows").
ONE_ROW_LANES, ONE_ROW_OUTPUTS = 16, 16


#: Storage words the skinny kernel reads (floating point: its accumulators are float32 / float64).
STORAGES = ("f32", "f64", "f16_bits", "bf16_bits")
#: Elements per vector load each storage word allows (a vector type exists in both backends:
#: float2 / float4, double2; 16-bit elements go as the bits of a float2 / float4), widest first.
VECTOR_WIDTHS = {"f32": (4, 2), "f64": (2,), "f16_bits": (8, 4), "bf16_bits": (8, 4)}


def load_width(et, cap: int, align: int, extent: int) -> int:
    """Elements per global load of an operand: the widest vector its alignment and ``cap`` allow
    that divides ``extent`` (the problem's size along the contiguous axis, so a vector is wholly
    inside or outside the problem), else 1 (scalar loads)."""
    for w in VECTOR_WIDTHS.get(et.storage, ()):   # a storage setup refuses (int8) reads scalars
        if w <= min(cap, align) and extent % w == 0:
            return w
    return 1


def pow2_at_least(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


def pow2_at_most(x: int) -> int:
    return 1 << (max(1, x).bit_length() - 1)


def skinny_axis(problem: MatmulProblem) -> tuple[bool, bool]:
    """(along_n, dot): which axis the outputs run along (N where M is the short side: the rhs is
    the big operand), and whether the big operand is contiguous along K. When both are 1 (a dot
    product) the operand contiguous along K is taken as the big one."""
    lhs_row, rhs_col = Layout(problem.lhs_layout) is Layout.ROW, Layout(problem.rhs_layout) is Layout.COL
    if problem.m == 1 and (problem.n != 1 or not lhs_row):
        return True, rhs_col
    if problem.n == 1 or problem.n < problem.m:
        return False, lhs_row
    return True, rhs_col


def skinny_rows(problem: MatmulProblem) -> int:
    """Rows of the staged operand: M where the outputs run along N, else N."""
    return problem.m if skinny_axis(problem)[0] else problem.n


def unit_outputs_for(rows: int) -> int:
    return next(r for most, r in UNIT_OUTPUTS if rows <= most)


def resolve_tiling(selection, problem: MatmulProblem, dialect: Dialect):
    """``selection`` with every skinny knob left at 0 chosen for ``problem`` on ``dialect``'s device:
    ``outputs`` per cube, ``units`` per cube, ``unroll`` loads in flight, ``chunk_k`` staged per
    row, ``unit_outputs`` (dot products: outputs per unit)."""
    rows = skinny_rows(problem)
    if min(problem.m, problem.n) > MAX_ROWS:
        return selection  # not a skinny problem: setup refuses it
    along_n, dot = skinny_axis(problem)
    big = problem.rhs if along_n else problem.lhs
    extent = problem.n if along_n else problem.m
    unroll = selection.unroll or UNROLL
    most = pow2_at_most(min(UNITS, dialect.device.max_threads_per_cube))
    reuse = 1
    if dot:
        # Enough lanes per output that each reads about ``unroll`` vectors of its row, at most
        # a plane's worth: long rows get 32 lanes reading consecutive 16-byte vectors.
        width = load_width(big, selection.vector_width, problem.rhs_align if along_n else problem.lhs_align,
                           problem.k)
        lanes = min(LANES, most, pow2_at_least(-(-problem.k // (width * unroll))))
        reuse = selection.unit_outputs or min(unit_outputs_for(rows), pow2_at_least(extent))
        target = 3 * max(1, dialect.device.compute_units) // 2
        if selection.unit_outputs or rows == 1:
            # `lanes` for every group of ``reuse`` outputs.
            if (rows == 1 and reuse == 1 and lanes == LANES and not (selection.outputs or selection.units)
                    and dialect.backend == "cuda" and (dialect.device.compute_capability or (0,)) >= (9, 0)
                    and big.itemsize == 2 and most // ONE_ROW_LANES >= ONE_ROW_OUTPUTS <= extent
                    and problem.batch * -(-extent // ONE_ROW_OUTPUTS) >= dialect.device.compute_units):
                lanes = ONE_ROW_LANES
            outputs = selection.outputs or min(most // lanes * reuse, pow2_at_least(extent))
            # Fewer outputs a cube where the cubes would not give every multiprocessor one and a half.
            # One row keeps the measured GEMV tiling.
            while not selection.outputs and rows > 1 and outputs > reuse and problem.batch * -(-extent // outputs) < target:
                outputs //= 2
            units = selection.units or max(1, lanes * outputs // reuse)
        else:
            # The cube one output a unit would make (lanes along K, one and a half cubes a
            # multiprocessor at least), each unit taking `reuse` of its outputs and a `reuse`-th of
            # each row: as many loads in flight a unit, a `reuse`-th of the shared-memory reads a
            # weight byte (the measured 2-row tiling: 8 outputs, 256 units, 128 lanes an output).
            outputs = selection.outputs or min(most // lanes, pow2_at_least(extent))
            while not selection.outputs and outputs > reuse and problem.batch * -(-extent // outputs) < target:
                outputs //= 2
            units = selection.units or max(1, lanes * outputs)
            reuse = min(reuse, outputs)
    else:
        per_unit = 16 // big.itemsize
        if selection.outputs:
            outputs = selection.outputs
        else:
            # The widest run per K row (up to 128 bytes: 8 groups of 16) that still gives
            # every multiprocessor work: 8192 bf16 outputs on 132 SMs -> 4 groups, 256 cubes.
            vectors = -(-extent // per_unit)
            target = 3 * max(1, dialect.device.compute_units) // 2
            outputs = per_unit * next((g for g in (8, 4, 2) if g <= vectors
                                       and problem.batch * -(-vectors // g) >= target), 1)
        groups = max(1, outputs // per_unit)
        # Slices of K: up to the cube's units, fewer when K is short (each at least ``unroll``
        # rows), never fewer than per_unit (each output's sum takes one unit).
        slices = min(max(1, most // groups), max(per_unit, pow2_at_least(-(-problem.k // unroll))))
        units = selection.units or groups * slices
    # A power of two times the units, so that problems of neighbouring K share one kernel; at
    # most STAGING loads per unit (each is a line of code), over all the rows.
    per_row = max(1, min(STAGING // rows, CHUNK_BYTES // WORD_BYTES[big.compute] // units // rows))
    chunk = selection.chunk_k or min(units * pow2_at_least(-(-problem.k // units)), units * per_row)
    if dot and not selection.chunk_k:
        # Every unit stages whole steps of the chunk and every load of a row lies in one chunk: a
        # multiple of both the units and the load width (5 rows of 2 units made 12 for a width of 8).
        whole = math.lcm(units, width)
        chunk = max(whole, chunk // whole * whole)
    return selection.override(outputs=outputs, units=units, unroll=unroll, chunk_k=chunk, unit_outputs=reuse)


def skinny_tuning_space(selection_class, problem: MatmulProblem, dialect: Dialect) -> list:
    """The rule's tiling, then each of 2, 4, 8 loads in flight per unit (the one knob the bandwidth
    sweeps found sensitive), one row also 8 outputs a cube; dot products of several rows also 1, 2
    and 4 outputs a unit (each staged vector's reuse); ``selection_class`` is the skinny algorithm's
    selection type."""
    space = [resolve_tiling(selection_class(), problem, dialect)]
    space += [resolve_tiling(selection_class(unroll=u), problem, dialect) for u in (2, 4, 8)]
    if skinny_rows(problem) == 1:       # 32 lanes an output (`ONE_ROW_LANES`' other)
        space.append(resolve_tiling(selection_class(outputs=8), problem, dialect))
    if skinny_rows(problem) > 1 and skinny_axis(problem)[1]:
        space += [resolve_tiling(selection_class(unit_outputs=r), problem, dialect) for r in (1, 2, 4)
                  if r * skinny_rows(problem) <= MAX_ACCUMULATORS]
    return distinct(space)


# -- skinny_split_k: K split over cubes -----------------------------------------------------------------
#: Loads in flight per unit of the split kernel (16 x 16 bytes x 256 units = 64 KiB per cube).
SPLIT_UNROLL = 16


def select_split_skinny(problem: MatmulProblem, dialect: Dialect, splits: int = 0) -> dict:
    """Every unit one 16-byte vector of outputs (one slice of K per cube), up to 256 units; about
    one cube per compute unit, K cut into as many ranges as that takes, each a whole number of
    staged chunks of at least 256 rows."""
    along_n, dot = skinny_axis(problem)
    if dot:
        raise SetupError("skinny_split_k", "the big operand is contiguous along K: each output is a dot "
                                           "product of whole rows (skinny reads it so)")
    big = problem.rhs if along_n else problem.lhs
    per_unit = 16 // big.itemsize
    vectors = -(-(problem.n if along_n else problem.m) // per_unit)
    units = min(UNITS, pow2_at_least(vectors), pow2_at_most(dialect.device.max_threads_per_cube))
    tiles = problem.batch * -(-vectors // units)
    if not splits:   # at least two: a caller who names this algorithm wants K split
        splits = max(2, round(max(1, dialect.device.compute_units) / tiles))
    chunk = units * pow2_at_least(-(-problem.k // (splits * units)))
    return dict(outputs=units * per_unit, units=units, unroll=SPLIT_UNROLL, chunk_k=chunk,
                split_k=-(-problem.k // chunk))


def split_skinny_tuning_space(problem: MatmulProblem, dialect: Dialect) -> list:
    return distinct([select_split_skinny(problem, dialect)] +
                    [select_split_skinny(problem, dialect, s) for s in (8, 16, 32, 64)])
