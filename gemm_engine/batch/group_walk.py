"""The walk over a grouped problem's tiles: which group, tile row and tile column a linear tile index
is, from group extents read in device memory (the batch levels of batch/grouped.py and
batch/grouped_tma.py render it; problem.py `Groups` describes the layouts).

The kernel takes the groups as one array parameter, ``groups`` (`GROUPS`): each group's end offset
(int32; "contiguous" rows, "k" reduction), each group's row count (int32; "masked") or a table of
`LIST_FIELDS` per group (int64; "list"). Extents are clamped where they are read (offsets into
``[previous end, M or K]``, counts into ``[0, M]``): routing that breaks the layout's promise
computes fewer rows, never reads or writes out of bounds.

Tiles are numbered group after group, each group's tiles in the batch level's dispatch order over
that group's tile rows and columns (its ``cubes_m`` follows from its row count): the default order
(`GROUPED_DEFAULT_DISPATCH`, column-major) walks down the tile rows of one column block of the
group's weights before the next, so each block of an expert's weights is read from memory once
while the expert's few row blocks of tokens stay in L2. An empty group has no tiles.

A cube walks its tiles in increasing order (``cube``, ``cube + step``, ...), so the walk goes
forward only: the group of the next tile is found from the group of the last (`loop`), O(groups +
tiles) extent reads per cube whatever the order of its tiles. The "k" layout has every group's
tiles (its extent changes the reduction's length, not the tile count): a division, as in a dense
batch. Nothing here depends on the extents on the host: the grid is a bound (`tile_bound`), so a
captured CUDA graph replays correctly with new routing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..problem import MatmulProblem
from .base import DispatchScope

#: The kernel parameter holding the group extents (`GroupWalk`); ``groups_base`` / ``groups_offset``.
GROUPS = "groups"
#: The int64 fields of one group of the "list" layout, in table order: its sizes, then each
#: operand's element offset from its base parameter (``lhs_base`` + ``lhs_offset``...) and its
#: leading dimension.
LIST_FIELDS = ("m", "n", "k", "lhs_offset", "lhs_ld", "rhs_offset", "rhs_ld", "out_offset", "out_ld")
#: The dispatch order a grouped batch level defaults to (see the module docstring).
GROUPED_DEFAULT_DISPATCH = "col_major"
EXTENT_FUNCTION = "gemm_engine_group_extent"


def groups_word(layout: str) -> str:
    """The element word of the ``groups`` array of ``layout``."""
    return "i64" if layout == "list" else "i32"


def tile_bound(problem: MatmulProblem, stage_m: int, stage_n: int) -> int:
    """The most tiles a call of ``problem`` can have, whatever its extents: the grid of a cube per
    tile (cubes past the call's tiles find no group and return)."""
    layout, groups = problem.groups.layout, problem.batch
    cubes_m, cubes_n = -(-problem.m // stage_m), -(-problem.n // stage_n)
    if layout == "contiguous":
        # sum_g ceil(m_g / BM) <= (M + nonempty * (BM - 1)) / BM, at most min(groups, M) groups nonempty.
        return (problem.m + min(groups, problem.m) * (stage_m - 1)) // stage_m * cubes_n
    return groups * cubes_m * cubes_n


@dataclass(frozen=True)
class GroupWalk:
    """The walk of one grouped kernel: its layout and stage tile."""

    layout: str
    stage_m: int
    stage_n: int

    @property
    def per_group_tiles(self) -> bool:
        """Whether the groups have tile counts of their own (read while walking); "k": all the same."""
        return self.layout != "k"

    # -- device functions (rendered once, before the kernel) -------------------------------------
    def functions(self, d) -> str:
        """The inline function reading group ``g``'s extent into ``lo`` and ``hi``: its first and
        end row (contiguous, masked: first 0) or reduction index (k), clamped into ``[0, bound]``;
        list: its m and n."""
        t = d.c_type(groups_word(self.layout))
        if self.layout == "list":
            width = len(LIST_FIELDS)
            body = [f"*lo = (i64)groups[g * {width}];", f"*hi = (i64)groups[g * {width} + 1];"]
        elif self.layout == "masked":
            body = ["const i64 count = (i64)groups[g];", "*lo = 0;",
                    "*hi = count < 0 ? 0 : (count > bound ? bound : count);"]
        else:   # end offsets: contiguous rows, k reduction
            body = ["i64 first = g > 0 ? (i64)groups[g - 1] : 0;", "i64 end = (i64)groups[g];",
                    "first = first < 0 ? 0 : (first > bound ? bound : first);",
                    "end = end < first ? first : (end > bound ? bound : end);",
                    "*lo = first;", "*hi = end;"]
        return "\n".join([f"INLINE void {EXTENT_FUNCTION}(const GLOBAL {t}* groups, const i64 g, const i64 bound, "
                          "i64* lo, i64* hi)", "{", *body, "}"])

    # -- the loop ----------------------------------------------------------------------------------
    def loop(self, first: str, step: str, origin: list[str], body: str,
             dispatch: Callable[[DispatchScope], list[str]], between: list[str] | None = None,
             once: bool = False) -> str:
        """The cube's tiles ``first``, ``first + step``, ... (C expressions) with ``origin``
        (statements reading what the walk defines: ``b`` the group, ``cube_row`` / ``cube_col`` its
        tile, ``group_lo`` / ``group_hi`` its extent; list: ``group_m`` / ``group_n``) and ``body`` in
        each, ``between`` after each; ``once``: the first tile only (a grid covering every tile).
        ``dispatch(scope)``: statements defining the scope's row and column from its inputs (the
        batch level's order)."""
        tail = [*(between or []), *(["break;"] if once else [])]
        if not self.per_group_tiles:
            return "\n".join([
                f"for (i64 cube = {first}; cube < batch * cubes_m * cubes_n; cube += {step}) {{",
                *dispatch(DispatchScope()),
                "i64 group_lo, group_hi;",
                f"{EXTENT_FUNCTION}(groups, b, K, &group_lo, &group_hi);",
                *origin, body, *tail, "}"])
        listed = self.layout == "list"
        if listed:     # the table's m and n: every group its own tile rows and columns
            sizes = [f"walk_cubes_m = (walk_lo + {self.stage_m - 1}) / {self.stage_m};",
                     f"walk_cubes_n = (walk_hi + {self.stage_n - 1}) / {self.stage_n};"]
        else:
            sizes = [f"walk_cubes_m = (walk_hi - walk_lo + {self.stage_m - 1}) / {self.stage_m};"]
        cubes_n = "walk_cubes_n" if listed else "cubes_n"
        scope = DispatchScope(cube="group_cube", cubes_m="walk_cubes_m", cubes_n=cubes_n, batch="1",
                              b="group_b0", row="cube_row", col="cube_col")
        extent = (["const i64 group_m = walk_lo, group_n = walk_hi;"] if listed
                  else ["const i64 group_lo = walk_lo, group_hi = walk_hi;"])
        return "\n".join([
            "{",
            "i64 walk_g = -1, walk_first = 0, walk_tiles = 0, walk_lo = 0, walk_hi = 0, walk_cubes_m = 0"
            + (", walk_cubes_n = 0;" if listed else ";"),
            f"for (i64 cube = {first}; ; cube += {step}) {{",
            # Forward to the group holding tile ``cube`` (empty groups have no tiles).
            "while (cube >= walk_first + walk_tiles) {",
            "walk_first += walk_tiles;",
            "if (++walk_g >= batch) break;",
            f"{EXTENT_FUNCTION}(groups, walk_g, {'0' if listed else 'M'}, &walk_lo, &walk_hi);",
            *sizes,
            f"walk_tiles = walk_cubes_m * {cubes_n};",
            "}",
            "if (walk_g >= batch) break;",
            "const i64 b = walk_g;",
            "const i64 group_cube = cube - walk_first;",
            *extent,
            *dispatch(scope),
            *origin, body, *tail,
            "}",
            "}"])
