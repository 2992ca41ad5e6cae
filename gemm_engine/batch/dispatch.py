"""Dispatch orders: which output tile of which batch entry a linear cube index computes.

A one-dimensional grid is used on every backend (grid y/z limits are 65535 on CUDA), and the
order is recovered in the kernel from ``cube`` (the cube's linear index), ``cubes_m``, ``cubes_n``.
Each order renders code that defines ``b``, ``cube_row`` and ``cube_col`` (all ``i64``); its helper
names start with ``dispatch_`` so that no global matmul's names clash with them.

Batch indices are part of the dispatch: cube ``c`` computes batch entry ``c / (cubes_m * cubes_n)``
and tile ``c % (cubes_m * cubes_n)`` of it in the order's sequence. Cubes with neighbouring indices
run at about the same time, so an order decides which operand blocks are read while still in cache:

* ``row_major``: along a row of tiles (the lhs row block is reused, every rhs block of the row is
  read once per row);
* ``col_major``: down a column of tiles (the mirror image);
* ``swizzled``: strips ``width`` tile columns wide, walked row by row down the strip and back up
  the next; rows alternate direction, so each tile shares its lhs row block or its rhs column
  block with the one before it, and a strip's ``width`` rhs blocks are reused on every row;
* ``grouped``: Triton's ``GROUP_M``: groups of ``width`` tile rows, walked column by column (down
  each column inside the group), so ``width`` lhs row blocks are reused on every column.

Every order is a bijection of ``[0, batch * cubes_m * cubes_n)`` onto (batch, row, column) for any
``cubes_m``, ``cubes_n`` and ``width``: the last strip or group may be narrower than ``width``.
Orders are frozen dataclasses: their parameters are part of the batch config (the compile key).
The contract, `Dispatch` and `register_dispatch` are in batch/base.py; a user's order registers
the same way these do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import DISPATCHES, Dispatch, dispatch_for, register_dispatch  # noqa: F401  (re-exported)

_SPLIT_BATCH = ["const i64 per_batch = cubes_m * cubes_n;",
                "const i64 b = cube / per_batch;",
                "const i64 dispatch_t = cube % per_batch;"]


@register_dispatch
@dataclass(frozen=True)
class RowMajorDispatch(Dispatch):
    """Consecutive cubes walk along a row of output tiles, then the next row, then the next batch."""

    name: ClassVar[str] = "row_major"

    def render(self) -> str:
        return "\n".join([
            "const i64 per_batch = cubes_m * cubes_n;",
            "const i64 b = cube / per_batch;",
            "const i64 cube_row = (cube % per_batch) / cubes_n;",
            "const i64 cube_col = (cube % per_batch) % cubes_n;",
        ])


@register_dispatch
@dataclass(frozen=True)
class ColMajorDispatch(Dispatch):
    """Consecutive cubes walk down a column of output tiles, then the next column."""

    name: ClassVar[str] = "col_major"

    def render(self) -> str:
        return "\n".join(_SPLIT_BATCH + ["const i64 cube_row = dispatch_t % cubes_m;",
                                         "const i64 cube_col = dispatch_t / cubes_m;"])


@register_dispatch
@dataclass(frozen=True)
class SwizzledDispatch(Dispatch):
    """Serpentine strips of ``width`` tile columns: down the even strips, up the odd ones, each row
    of a strip walked in the direction opposite to the row before (see the module docstring)."""

    name: ClassVar[str] = "swizzled"
    has_width: ClassVar[bool] = True
    width: int = 4

    def render(self) -> str:
        w = self.width
        if w == 1:
            # Strips one column wide: down even columns, up odd ones. The general form below, with its
            # one-column strip width and always-0 column inside the strip, put cubes on wrong tiles
            # on PoCL 5.0 (issue 35; right on PoCL 3.1, 6.0 and in the bijection harness).
            return "\n".join(_SPLIT_BATCH + [
                "const i64 cube_col = dispatch_t / cubes_m;",
                "const i64 dispatch_r = dispatch_t - cube_col * cubes_m;",
                "const i64 cube_row = (cube_col & 1) ? cubes_m - 1 - dispatch_r : dispatch_r;",
            ])
        return "\n".join(_SPLIT_BATCH + [
            f"const i64 dispatch_strip = dispatch_t / (cubes_m * {w});",
            # The last strip holds the columns left over: narrower when width does not divide cubes_n.
            f"const i64 dispatch_w = cubes_n - dispatch_strip * {w} < {w} ? cubes_n - dispatch_strip * {w} : {w};",
            f"const i64 dispatch_i = dispatch_t - dispatch_strip * (cubes_m * {w});",
            "const i64 dispatch_r = dispatch_i / dispatch_w;",
            "const i64 dispatch_c = dispatch_i % dispatch_w;",
            # Odd strips walk up: the first row of strip s + 1 is the last row of strip s.
            "const i64 cube_row = (dispatch_strip & 1) ? cubes_m - 1 - dispatch_r : dispatch_r;",
            # Odd rows of a strip walk left: the next row starts in the column the last one ended in.
            f"const i64 cube_col = dispatch_strip * {w} + ((dispatch_r & 1) ? dispatch_w - 1 - dispatch_c : dispatch_c);",
        ])


@register_dispatch
@dataclass(frozen=True)
class GroupedDispatch(Dispatch):
    """Triton's grouped order: groups of ``width`` tile rows, column-major inside a group."""

    name: ClassVar[str] = "grouped"
    has_width: ClassVar[bool] = True
    width: int = 4

    def render(self) -> str:
        g = self.width
        return "\n".join(_SPLIT_BATCH + [
            f"const i64 dispatch_group = dispatch_t / ({g} * cubes_n);",
            f"const i64 dispatch_m0 = dispatch_group * {g};",
            # The last group holds the rows left over.
            f"const i64 dispatch_rows = cubes_m - dispatch_m0 < {g} ? cubes_m - dispatch_m0 : {g};",
            f"const i64 dispatch_i = dispatch_t - dispatch_group * ({g} * cubes_n);",
            "const i64 cube_row = dispatch_m0 + dispatch_i % dispatch_rows;",
            "const i64 cube_col = dispatch_i / dispatch_rows;",
        ])
