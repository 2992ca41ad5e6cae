"""``skinny``: M = 1 (vector-matrix) and N = 1 (matrix-vector) products, built for memory bandwidth.

The skinny global matmul (`global_.skinny`) under the partitioned batch level: the kernel
signature, batch entries, dispatch and the fused epilogue are the batch level's. Any other shape is
refused with a SetupError, so the ``auto`` family can try it first.

``skinny_split_k`` is the same global matmul under the split-K batch level: for a big operand
contiguous along the outputs (M = 1 with a row-major rhs, as in ``x @ W``), each cube's units
read whole 16-byte vectors of one long run of a K row (256 units: 4 KiB per row), and K is split
over cubes instead of over the units of a cube; a second kernel adds the partials in a fixed order.
Long contiguous runs per row and a wave of cubes each with many loads in flight are what reach the
read bandwidth (bf16 1 x 8192 x 8192 on the H100: 0.0488 ms against 0.0576 for the in-cube split,
bench/results/h100_2026-11-21_gemv_probe.txt).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..batch.split_k import SplitKBatchMatmul
from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..global_.loaders import _WORD_BYTES
from ..global_.skinny import SkinnyGlobalMatmul, load_width, skinny_axis
from ..problem import MatmulProblem
from .base import Algorithm, distinct, register

#: Shared memory the staged vector may take: 32 KiB leaves room for several cubes per
#: multiprocessor and holds all of K = 8192 in float32 (one chunk: no barrier inside the K loop).
_CHUNK_BYTES = 32 * 1024
#: Most vector elements each unit stages per chunk.
_STAGING = 32
#: Most units per cube (fewer for short problems: small cubes, more of them).
_UNITS = 256
#: Global loads in flight per unit: 8 x 16 bytes x 256 units = 32 KiB per cube.
_UNROLL = 8
#: Most units sharing one output of a dot product (a plane's worth on GPUs).
_LANES = 32


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


def _pow2_at_most(x: int) -> int:
    return 1 << (max(1, x).bit_length() - 1)


@dataclass(frozen=True)
class SkinnySelection:
    """Tiling of the skinny kernel (see `global_.skinny`). A field left at 0 is chosen for the
    problem and device (`resolve`), so a sweep may fix one and keep the rest.

    ``outputs``: output elements per cube; ``units``: units per cube (dot: ``units / outputs``
    lanes share each output; split-K: ``outputs / per_unit`` groups, ``units / groups`` slices of
    K); ``unroll``: global loads in flight per unit; ``vector_width``: cap on the elements of one
    global load (16 bytes at most: the operand's alignment narrows it); ``chunk_k``: vector
    elements staged in shared memory at a time (a multiple of ``units``)."""

    outputs: int = 0
    units: int = 0
    unroll: int = 0
    vector_width: int = 8
    chunk_k: int = 0
    dispatch: str = "row_major"
    split_k: int = 0          # K ranges over cubes (``skinny_split_k`` only; 0: it chooses)

    def resolve(self, problem: MatmulProblem, dialect: Dialect) -> "SkinnySelection":
        """This selection with every 0 field chosen for ``problem`` on ``dialect``'s device."""
        if problem.m != 1 and problem.n != 1:
            return self  # not a skinny problem: setup refuses it
        along_n, dot = skinny_axis(problem)
        big = problem.rhs if along_n else problem.lhs
        extent = problem.n if along_n else problem.m
        unroll = self.unroll or _UNROLL
        most = _pow2_at_most(min(_UNITS, dialect.device.max_threads_per_cube))
        if dot:
            # Enough lanes per output that each reads about ``unroll`` vectors of its row, at most
            # a plane's worth: long rows get 32 lanes reading consecutive 16-byte vectors.
            width = load_width(big, self.vector_width, problem.rhs_align if along_n else problem.lhs_align,
                               problem.k)
            lanes = min(_LANES, most, _pow2_at_least(-(-problem.k // (width * unroll))))
            outputs = self.outputs or min(most // lanes, _pow2_at_least(extent))
            units = self.units or lanes * outputs
        else:
            per_unit = 16 // big.itemsize
            if self.outputs:
                outputs = self.outputs
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
            slices = min(max(1, most // groups), max(per_unit, _pow2_at_least(-(-problem.k // unroll))))
            units = self.units or groups * slices
        # A power of two times the units, so that problems of neighbouring K share one kernel; at
        # most _STAGING loads per unit (each is a line of code).
        cap = units * max(1, min(_STAGING, _CHUNK_BYTES // _WORD_BYTES[big.compute] // units))
        chunk = self.chunk_k or min(units * _pow2_at_least(-(-problem.k // units)), cap)
        return replace(self, outputs=outputs, units=units, unroll=unroll, chunk_k=chunk)


@register
class SkinnyAlgorithm(Algorithm):
    name = "skinny"
    selection_class = SkinnySelection
    global_ = SkinnyGlobalMatmul

    def build(self):
        # No stage and no loaders: the global level reads global memory itself.
        return self.batch(self.global_())

    def select(self, problem, dialect):
        return SkinnySelection().resolve(problem, dialect)

    def tuning_space(self, problem, dialect):
        # Loads in flight per unit: the one knob the bandwidth sweeps found sensitive.
        return distinct([self.select(problem, dialect)] + [
            SkinnySelection(unroll=u).resolve(problem, dialect) for u in (2, 4, 8)])


#: Loads in flight per unit of the split kernel (16 x 16 bytes x 256 units = 64 KiB per cube: the
#: probe's best, against 0.0499 ms for 8).
_SPLIT_UNROLL = 16
#: Smallest big operand worth a second kernel: below it the in-cube split is one launch.
_SPLIT_MIN_BYTES = 16 << 20


def select_split_skinny(problem: MatmulProblem, dialect: Dialect, splits: int = 0) -> SkinnySelection:
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
    units = min(_UNITS, _pow2_at_least(vectors), _pow2_at_most(dialect.device.max_threads_per_cube))
    tiles = problem.batch * -(-vectors // units)
    if not splits:   # at least two: a caller who names this algorithm wants K split
        splits = max(2, round(max(1, dialect.device.compute_units) / tiles))
    chunk = units * _pow2_at_least(-(-problem.k // (splits * units)))
    return SkinnySelection(outputs=units * per_unit, units=units, unroll=_SPLIT_UNROLL, chunk_k=chunk,
                           split_k=-(-problem.k // chunk))


@register
class SkinnySplitKAlgorithm(SkinnyAlgorithm):
    name = "skinny_split_k"
    batch = SplitKBatchMatmul

    def select(self, problem, dialect):
        return select_split_skinny(problem, dialect)

    def tuning_space(self, problem, dialect):
        first = self.select(problem, dialect)
        return distinct([first] + [select_split_skinny(problem, dialect, s) for s in (8, 16, 32, 64)])


class SkinnySplitWhenWorthIt(SkinnySplitKAlgorithm):
    """``skinny_split_k`` for ``auto``: only on CUDA (where it was measured), where the big operand
    is large enough (16 MiB) that a second launch is small against streaming it, and where K is at
    least the output extent: each of the one-launch kernel's cubes then walks a long K over short
    runs of each row. On the H100 (bench/results/h100_2026-11-21_issue4_session4.md), bf16
    1 x 8192 x 8192: split 0.0509 ms, one launch 0.0532; 1 x 14336 x 4096: split 0.0455, one
    launch 0.0429."""

    name = "skinny_split_k"   # auto's gate on the registered algorithm, reported under its name

    def setup(self, problem, dialect):
        if dialect.backend != "cuda":
            raise SetupError(self.name, "measured on CUDA GPUs only; other devices take skinny")
        if problem.m == 1 or problem.n == 1:
            big = problem.rhs if skinny_axis(problem)[0] else problem.lhs
            extent = max(problem.m, problem.n)
            size = problem.batch * problem.k * extent * big.itemsize
            if problem.k < extent:
                raise SetupError(self.name, f"K = {problem.k} is shorter than the {extent} outputs: "
                                            "one launch streams it faster")
            if size < _SPLIT_MIN_BYTES:
                raise SetupError(self.name, f"the big operand's {size} bytes are streamed fast enough "
                                            f"by one launch (split from {_SPLIT_MIN_BYTES})")
        return super().setup(problem, dialect)
