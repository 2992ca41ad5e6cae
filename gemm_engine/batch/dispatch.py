"""Dispatch orders: which output tile of which batch entry a linear cube index computes.

A one-dimensional grid is used on every backend (grid y/z limits are 65535 on CUDA), and the
order is recovered in the kernel from the cube's linear index, the tile counts along M and N and
the batch size: the inputs a `DispatchScope` names. Each order renders code that defines the
scope's outputs (the batch entry, tile row and tile column, all ``i64``); its helper names start
with the scope's prefix (``dispatch_``) so that no global matmul's names clash with them.

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

from .base import DISPATCHES, Dispatch, DispatchScope, dispatch_for, register_dispatch  # noqa: F401  (re-exported)


def _split_batch(s: DispatchScope) -> list[str]:
    """The batch entry ``s.b`` and the tile index inside it, ``{prefix}t``."""
    p = s.prefix
    return [f"const i64 {p}per_batch = {s.cubes_m} * {s.cubes_n};",
            f"const i64 {s.b} = {s.cube} / {p}per_batch;",
            f"const i64 {p}t = {s.cube} % {p}per_batch;"]


@register_dispatch
@dataclass(frozen=True)
class RowMajorDispatch(Dispatch):
    """Consecutive cubes walk along a row of output tiles, then the next row, then the next batch."""

    name: ClassVar[str] = "row_major"

    def render(self, s: DispatchScope = DispatchScope()) -> str:
        p = s.prefix
        return "\n".join([
            f"const i64 {p}per_batch = {s.cubes_m} * {s.cubes_n};",
            f"const i64 {s.b} = {s.cube} / {p}per_batch;",
            f"const i64 {s.row} = ({s.cube} % {p}per_batch) / {s.cubes_n};",
            f"const i64 {s.col} = ({s.cube} % {p}per_batch) % {s.cubes_n};",
        ])


@register_dispatch
@dataclass(frozen=True)
class ColMajorDispatch(Dispatch):
    """Consecutive cubes walk down a column of output tiles, then the next column."""

    name: ClassVar[str] = "col_major"

    def render(self, s: DispatchScope = DispatchScope()) -> str:
        p = s.prefix
        return "\n".join(_split_batch(s) + [f"const i64 {s.row} = {p}t % {s.cubes_m};",
                                            f"const i64 {s.col} = {p}t / {s.cubes_m};"])


@register_dispatch
@dataclass(frozen=True)
class SwizzledDispatch(Dispatch):
    """Serpentine strips of ``width`` tile columns: down the even strips, up the odd ones, each row
    of a strip walked in the direction opposite to the row before (see the module docstring)."""

    name: ClassVar[str] = "swizzled"
    has_width: ClassVar[bool] = True
    width: int = 4

    def render(self, s: DispatchScope = DispatchScope()) -> str:
        w, p, m, n = self.width, s.prefix, s.cubes_m, s.cubes_n
        if w == 1:
            # Strips one column wide: down even columns, up odd ones. The general form below, with its
            # one-column strip width and always-0 column inside the strip, put cubes on wrong tiles
            # on PoCL 5.0 (issue 35; right on PoCL 3.1, 6.0 and in the bijection harness).
            return "\n".join(_split_batch(s) + [
                f"const i64 {s.col} = {p}t / {m};",
                f"const i64 {p}r = {p}t - {s.col} * {m};",
                f"const i64 {s.row} = ({s.col} & 1) ? {m} - 1 - {p}r : {p}r;",
            ])
        return "\n".join(_split_batch(s) + [
            f"const i64 {p}strip = {p}t / ({m} * {w});",
            # The last strip holds the columns left over: narrower when width does not divide cubes_n.
            f"const i64 {p}w = {n} - {p}strip * {w} < {w} ? {n} - {p}strip * {w} : {w};",
            f"const i64 {p}i = {p}t - {p}strip * ({m} * {w});",
            f"const i64 {p}r = {p}i / {p}w;",
            f"const i64 {p}c = {p}i % {p}w;",
            # Odd strips walk up: the first row of strip s + 1 is the last row of strip s.
            f"const i64 {s.row} = ({p}strip & 1) ? {m} - 1 - {p}r : {p}r;",
            # Odd rows of a strip walk left: the next row starts in the column the last one ended in.
            f"const i64 {s.col} = {p}strip * {w} + (({p}r & 1) ? {p}w - 1 - {p}c : {p}c);",
        ])


@register_dispatch
@dataclass(frozen=True)
class GroupedDispatch(Dispatch):
    """Triton's grouped order: groups of ``width`` tile rows, column-major inside a group."""

    name: ClassVar[str] = "grouped"
    has_width: ClassVar[bool] = True
    width: int = 4

    def render(self, s: DispatchScope = DispatchScope()) -> str:
        g, p, m, n = self.width, s.prefix, s.cubes_m, s.cubes_n
        return "\n".join(_split_batch(s) + [
            f"const i64 {p}group = {p}t / ({g} * {n});",
            f"const i64 {p}m0 = {p}group * {g};",
            # The last group holds the rows left over.
            f"const i64 {p}rows = {m} - {p}m0 < {g} ? {m} - {p}m0 : {g};",
            f"const i64 {p}i = {p}t - {p}group * ({g} * {n});",
            f"const i64 {s.row} = {p}m0 + {p}i % {p}rows;",
            f"const i64 {s.col} = {p}i / {p}rows;",
        ])
