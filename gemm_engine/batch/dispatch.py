"""Dispatch orders: which output tile of which batch entry a linear cube index computes.

A one-dimensional grid is used on every backend (grid y/z limits are 65535 on CUDA), and the
order is recovered in the kernel from ``cube`` (the cube's linear index), ``cubes_m``, ``cubes_n``.
Each order renders code that defines ``b``, ``cube_row`` and ``cube_col`` (all ``i64``).
"""
from __future__ import annotations


class Dispatch:
    name = "dispatch"

    def render(self) -> str:
        raise NotImplementedError


class RowMajorDispatch(Dispatch):
    """Consecutive cubes walk along a row of output tiles, then the next row, then the next batch."""

    name = "row_major"

    def render(self) -> str:
        return "\n".join([
            "const i64 per_batch = cubes_m * cubes_n;",
            "const i64 b = cube / per_batch;",
            "const i64 cube_row = (cube % per_batch) / cubes_n;",
            "const i64 cube_col = (cube % per_batch) % cubes_n;",
        ])


DISPATCHES = {d.name: d for d in (RowMajorDispatch(),)}
