"""The shapes a grouped call's epilogue arrays take (`grouped_matmul`'s ``bias``, ``scale_a``,
``scale_b``, ``row_scale``), by layout, and the strides its kernels read them with.

A grouped call has ``groups`` groups (problem.py `Groups`); each term is shared by the groups or has
one entry per group (a leading axis of ``groups``: a bias or weight scales per expert). Its kernel
reads element ``i`` of group ``g`` at ``g * group_stride + i * stride`` (`term_strides`; 0 where it
broadcasts). Rows are the lhs's: all the tokens' in the contiguous layout (``(M,)``, a routing
weight per token, indexed by the token's row), a group's slab in the masked one (``(groups, M)``).

| term | contiguous (M tokens) | masked (groups, M) | k (reduction grouped) |
|---|---|---|---|
| ``bias`` over columns | (N,) or (groups, N) | the same | the same |
| ``bias`` over rows | (M,) | (M,) or (groups, M) | (M,) or (groups, M) |
| ``row_scale`` | (M,) | (groups, M) | (M,) or (groups, M) |
| ``scale_a`` | number, (groups,) per group, (M,) per row, (M, ceil(K/128)) per block | (groups, M), (groups, M, ceil(K/128)) | (M,), (groups, M), (groups,) |
| ``scale_b`` | number, (groups,) / (groups, 1) per group, (N,), (groups, N), (groups, ceil(K/128), ceil(N/128)) | the same | (N,), (groups, N), (groups,) |

Where a shape could mean two kinds (``groups == M``, ``groups == N``) it takes the kind listed
first for its axis (per row, per column); ``(groups, 1)`` always means one value per group.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scales import BLOCK, SCALE_DTYPES, Scale


@dataclass(frozen=True)
class GroupShape:
    """A grouped call's layout and sizes: ``m`` rows of the lhs (all tokens; a masked group's slab),
    ``k`` the reduction (all of it: "k"), ``n`` the columns."""

    layout: str
    groups: int
    m: int
    n: int
    k: int


def _fail(label: str, dims, expected: str):
    raise ValueError(f"grouped_matmul: {label} has shape {tuple(dims)}; expected {expected}")


def row_kind(label: str, dims, g: GroupShape) -> bool:
    """Whether a per-row term of shape ``dims`` (bias over rows, row_scale) has one row vector per
    group; ValueError naming ``label`` for a shape the layout does not take."""
    dims = tuple(int(x) for x in dims)
    if dims in ((g.m,), (g.m, 1)):
        return False
    if g.layout != "contiguous" and dims in ((g.groups, g.m), (g.groups, g.m, 1)):
        return True
    _fail(label, dims, f"(M,) = ({g.m},)" + ("" if g.layout == "contiguous" else f" or (groups, M) = ({g.groups}, {g.m})"))


def column_kind(label: str, dims, g: GroupShape) -> bool:
    """Whether a per-column term (bias over columns) has one row of N per group."""
    dims = tuple(int(x) for x in dims)
    if dims in ((g.n,), (1, g.n)):
        return False
    if dims in ((g.groups, g.n), (g.groups, 1, g.n)):
        return True
    _fail(label, dims, f"(N,) = ({g.n},) or (groups, N) = ({g.groups}, {g.n})")


def grouped_scale(value, label: str, g: GroupShape, lhs: bool) -> Scale | None:
    """The kind of a grouped call's operand scale (see the module docstring): a `Scale` whose
    ``per_group`` says it has a leading axis of groups."""
    if value is None:
        return None
    if isinstance(value, float):
        return Scale("tensor", number=value)
    if np.dtype(value.dtype).name not in SCALE_DTYPES:
        raise TypeError(f"grouped_matmul: {label} must hold floating-point values ({', '.join(SCALE_DTYPES)}), "
                        f"got dtype {np.dtype(value.dtype).name!r}")
    dims = tuple(int(x) for x in value.shape)
    if int(np.prod(dims, dtype=np.int64)) == 1 and not (len(dims) >= 1 and dims[0] == g.groups == 1):
        return Scale("tensor", array=value)
    kb, nb, e = -(-g.k // BLOCK), -(-g.n // BLOCK), g.groups
    if lhs:
        rows = {"contiguous": ((g.m,), (g.m, 1)), "masked": ((e, g.m), (e, g.m, 1)),
                "k": ((g.m,), (g.m, 1), (e, g.m), (e, g.m, 1))}[g.layout]
        blocks = {"contiguous": (g.m, kb), "masked": (e, g.m, kb)}.get(g.layout)
        if dims in rows:
            return Scale("row", array=value, per_group=len(dims) >= 2 and dims[:2] == (e, g.m) and g.layout != "contiguous")
        what = f"per row {rows[0]}" + (f", per block {blocks}" if blocks else "")
    else:
        if dims in ((g.n,), (1, g.n)):
            return Scale("col", array=value)
        if dims in ((e, g.n), (e, 1, g.n)):
            return Scale("col", array=value, per_group=True)
        blocks = (e, kb, nb) if g.layout != "k" else None
        what = f"per column (N,) = ({g.n},) or (groups, N) = ({e}, {g.n})" + (f", per block {blocks}" if blocks else "")
    if dims in ((e,), (e, 1)):
        return Scale("group", array=value, per_group=True)
    if blocks is not None and dims == blocks:
        return Scale("block", array=value, per_group=len(blocks) == 3)
    _fail(label, dims, f"a number, one element, (groups,) = ({e},) per group, {what}")


def term_strides(dims, strides, per_group: bool) -> tuple[int, int] | None:
    """(stride, group_stride) in elements of a term of shape ``dims`` with element ``strides``: the
    group axis first where ``per_group``; the stride along the one other axis longer than 1 (a
    block scale: its row pitch, its last axis contiguous); None where no pair describes it (copy)."""
    dims, strides = list(dims), list(strides)
    group = strides[0] if per_group and dims[0] > 1 else 0
    rest = list(zip(dims[1:], strides[1:])) if per_group else list(zip(dims, strides))
    long = [(n, s) for n, s in rest if n > 1]
    if not long:
        return 0, group
    if len(long) == 1:
        return long[0][1], group
    if len(long) == 2 and long[1][1] == 1:      # a block scale's (rows, blocks): its row pitch
        return long[0][1], group
    return None
