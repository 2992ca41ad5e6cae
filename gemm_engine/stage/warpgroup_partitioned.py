"""Warpgroup-partitioned stage: every warpgroup (4 consecutive warps) owns ``partition_m`` wgmma
tiles of 64 x tile_n, stacked along m.

Warpgroups are laid out row-major over the stage (``warpgroups_m x warpgroups_n``); warpgroup w
covers rows ``(w / warpgroups_n) * partition_m * 64`` onwards and columns ``(w % warpgroups_n) *
tile_n`` onwards. Warpgroup w is units 128w..128w+127, so it starts at a warp index divisible by 4,
as wgmma requires.

Operands are not read into registers: the stage hands the tile a descriptor per (k slice, m tile)
built from the slot's base descriptor (``lhs_smem`` / ``rhs_smem`` in ``execute`` are 64-bit
descriptor expressions of the current slot's lhs and rhs stage) plus compile-time offsets, laid out
by `SwizzledOperandLayout`. Differences from the `StageMatmul` contract, because wgmma is
asynchronous: ``execute`` fences, issues every wgmma of the stage and commits them as one batch but
does not wait; the global level calls ``wait(pending)`` before shared memory they read may be
overwritten, and ``finish`` (wait for everything, pin the accumulators) before ``write``.

The tile is any that declares `WARPGROUP_SCOPE` and has that capability's interface
(compose/capabilities.py: `WarpgroupTileInterface`, its config `WarpgroupTileConfigFields`), checked at
setup; `WgmmaTile` is the built-in one. The accumulator sets a global level may name are the
config's `WarpgroupFragments`.

Events: ``Begin``; ``TileMatmulCompleted`` after each wgmma issue (n = k tiles * partition_m);
``Finish``. No fragment loads, so no ``LhsLoaded`` / ``RhsLoaded``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..codegen.dialect import Dialect
from ..codegen.emitter import roll
from ..compose.contracts import Requirement, require, require_config
from ..errors import SetupError
from ..compose.capabilities import ASYNC_DESCRIPTOR_STAGE, SWIZZLED_SMEM, WARPGROUP_SCOPE
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..tile.wgmma import SWIZZLE_BYTES, WARPGROUP, SwizzledOperandLayout, operand_swizzle
from .base import StageConfig, StageMatmul, Writer, stores
from .events import Begin, Finish, StageEventListener, TileMatmulCompleted

# Accumulator registers per unit beyond which ptxas spills (255 in all, addresses need some).
_MAX_ACC_REGS = 128


@dataclass(frozen=True)
class WarpgroupFragments:
    """The accumulator sets a warpgroup stage declares, ``{set}_{i}`` for each of its ``partition_m``
    tiles, by the name a global level passes where it picks one (``acc=``): ``acc``, what ``write``
    stores; ``behind``, a promoting level's second partial set (`declare_promoted` with
    ``behind``); ``promoted``, the float32 sums of promotion (arrays of the tile's ``acc_regs``)."""

    acc: str = "acc"
    behind: str = "accb"
    promoted: str = "pacc"


@dataclass(frozen=True)
class WarpgroupStageConfig(StageConfig):
    warpgroups_m: int = 2
    warpgroups_n: int = 1
    partition_m: int = 1
    lhs_layout: SwizzledOperandLayout | None = None
    rhs_layout: SwizzledOperandLayout | None = None
    fragments: WarpgroupFragments = field(default=WarpgroupFragments())

    @property
    def lhs_smem_elems(self) -> int:
        return self.lhs_layout.smem_bytes // self.lhs_layout.itemsize

    @property
    def rhs_smem_elems(self) -> int:
        return self.rhs_layout.smem_bytes // self.rhs_layout.itemsize


class WarpgroupPartitionedStage(StageMatmul):
    name = "warpgroup_partitioned_stage"
    knobs = (Knob("warpgroups_m", 2, "warpgroups per cube along m"),
             Knob("warpgroups_n", 1, "warpgroups per cube along n"),
             Knob("partition_m", 1, "64-row tiles per warpgroup, stacked along m"),
             Knob("stage_k", 0, "k per ring slot (0: one 128-byte swizzled row: 64 16-bit, 32 tf32 or 128 int8 elements)"))
    provides = frozenset({ASYNC_DESCRIPTOR_STAGE})
    #: The stage's extent, derived from the knobs (a selection has them as read-only properties).
    selection_properties = {"stage_m": lambda s: s.warpgroups_m * s.partition_m * 64,
                            "stage_n": lambda s: s.warpgroups_n * s.tile_n}
    requires = (Requirement.of("tile", WARPGROUP_SCOPE),
                Requirement.of("lhs_loader", SWIZZLED_SMEM, why="wgmma reads swizzled stages"),
                Requirement.of("rhs_loader", SWIZZLED_SMEM, why="wgmma reads swizzled stages"))

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool = False,
              rhs_k_contiguous: bool = False) -> WarpgroupStageConfig:
        require(self.name, "tile", self.tile, WARPGROUP_SCOPE)
        tc = self.tile.setup(problem, selection, dialect)
        require_config(self.name, "tile", self.tile, tc, WARPGROUP_SCOPE)
        if (lhs_k_contiguous, rhs_k_contiguous) != (not tc.lhs_mn_major, not tc.rhs_mn_major):
            raise SetupError(self.name, "the loaders store the operands in another orientation than the "
                                        "wgmma tile reads them (its transpose bits follow the global layouts)")
        wm, wn = selection.warpgroups_m, selection.warpgroups_n
        itemsize = tc.itemsize
        row = SWIZZLE_BYTES // itemsize
        pm, sk = selection.partition_m, selection.stage_k or row
        self._check_positive(warpgroups_m=wm, warpgroups_n=wn, partition_m=pm)
        # One 128-byte swizzled row of k per slot (64 16-bit, 128 int8 elements), in both
        # orientations for 16-bit (one ring layout keeps the loader simple). tf32 (K-major only):
        # one or two 128-byte k-atoms of 32.
        allowed = (row, 2 * row) if itemsize == 4 else (row,)
        if sk not in allowed:
            raise SetupError(self.name, f"stage_k={sk}; the 128-byte swizzled layout of {tc.kind} needs "
                                        f"stage_k in {allowed}")
        if pm * tc.acc_regs > _MAX_ACC_REGS:
            raise SetupError(self.name, f"partition_m={pm} x tile_n={tc.tile_n} needs {pm * tc.acc_regs} "
                                        f"accumulator registers per unit (at most {_MAX_ACC_REGS})")
        units = self._groups_units(wm * wn, "warpgroups", WARPGROUP, dialect)
        sm, sn = wm * pm * 64, wn * tc.tile_n
        # The swizzle by one warpgroup's tile: each one's first x must start a swizzled row.
        lhs = SwizzledOperandLayout(tc.lhs_mn_major, sm, sk, itemsize, operand_swizzle(tc.lhs_mn_major, pm * 64, itemsize))
        rhs = SwizzledOperandLayout(tc.rhs_mn_major, sn, sk, itemsize, operand_swizzle(tc.rhs_mn_major, tc.tile_n, itemsize))
        lhs.check(self.name, "lhs")
        rhs.check(self.name, "rhs")
        return WarpgroupStageConfig(tile=tc, stage_m=sm, stage_n=sn, stage_k=sk, units=units,
                                    lhs_ld=lhs.row_elems, rhs_ld=rhs.row_elems,   # elements per swizzled row
                                    lhs_k_contiguous=not tc.lhs_mn_major,
                                    rhs_k_contiguous=not tc.rhs_mn_major,
                                    warpgroups_m=wm, warpgroups_n=wn, partition_m=pm,
                                    lhs_layout=lhs, rhs_layout=rhs)

    def declare(self, cfg: WarpgroupStageConfig, d: Dialect) -> str:
        tc = cfg.tile
        lines = [
            self.region(cfg),
            self.tile.declare_lanes(tc, d),
            # Modulo the stage's units: a global level may run copies of the stage side by side
            # (ping-pong consumers, each copy on its own tiles), each numbering its warpgroups alike.
            # Plane-uniform, so that the descriptor arithmetic below stays in uniform registers.
            f"const int wg_index = {d.plane_uniform(f'(UNIT_ID % {cfg.units}) / {WARPGROUP}')};",
            f"const int wg_m0 = (wg_index / {cfg.warpgroups_n}) * {cfg.partition_m * 64};",
            f"const int wg_n0 = (wg_index % {cfg.warpgroups_n}) * {tc.tile_n};",
            # This warpgroup's first tile, as a descriptor start-address increment (bytes >> 4).
            f"const u64 wg_lhs_desc = (u64)(({cfg.lhs_layout.tile_offset('wg_m0', 0)}) >> 4);",
            f"const u64 wg_rhs_desc = (u64)(({cfg.rhs_layout.tile_offset('wg_n0', 0)}) >> 4);",
        ]
        acc = cfg.fragments.acc
        lines += [self.tile.declare_acc(tc, d, f"{acc}_{i}") for i in range(cfg.partition_m)]
        return "\n".join(lines)

    @staticmethod
    def first_row(cfg: WarpgroupStageConfig) -> str:
        """C expression: the first row of the stage tile this unit's warpgroup computes (its
        ``partition_m`` 64-row tiles follow it), for a global level that skips what lies past M."""
        return "wg_m0"

    def init_accumulators(self, cfg, d):
        return "\n".join(self.tile.init_acc(cfg.tile, d, f"{cfg.fragments.acc}_{i}") for i in range(cfg.partition_m))

    def execute(self, cfg: WarpgroupStageConfig, d: Dialect, lhs_smem: str, rhs_smem: str,
                listener: StageEventListener, fresh: bool = False, acc: str = "") -> str:
        """``fresh``: the stage's first k slice overwrites the accumulators (a promoting global
        level's per-block partial products) instead of adding to them. ``acc``: which set of
        ``cfg.fragments`` ("": ``acc``; ``behind``: the second partial set of `declare_promoted`)."""
        t, tc = self.tile, cfg.tile
        acc = acc or cfg.fragments.acc
        nk, pm = cfg.stage_k // tc.tile_k, cfg.partition_m
        out = [listener.on_event(Begin()), t.fence(d)]
        for kk in range(nk):
            # The tile's start-address increment (bytes >> 4), a constant.
            k0 = kk * tc.tile_k
            rhs_off = cfg.rhs_layout.tile_offset_bytes(0, k0) >> 4
            for i in range(pm):
                lhs_off = cfg.lhs_layout.tile_offset_bytes(i * 64, k0) >> 4
                lhs = f"({lhs_smem} + wg_lhs_desc + {lhs_off})"
                rhs = f"({rhs_smem} + wg_rhs_desc + {rhs_off})"
                out.append(t.execute(tc, d, lhs, rhs, f"{acc}_{i}", overwrite=fresh and kk == 0))
                out.append(listener.on_event(TileMatmulCompleted(kk * pm + i, nk * pm)))
        out += [t.commit(d), listener.on_event(Finish())]
        return "\n".join(c for c in out if c)

    def wait(self, cfg: WarpgroupStageConfig, d: Dialect, pending: int) -> str:
        """Until at most ``pending`` committed batches (stages) are still running."""
        return self.tile.wait(d, pending)

    def finish(self, cfg: WarpgroupStageConfig, d: Dialect) -> str:
        """Every batch done and the accumulators pinned: ``write`` may read them."""
        return "\n".join([self.tile.wait(d, 0), self.pin(cfg, d)])

    # -- promotion: float32 sums of per-K-block partial products ----------------------------------
    # A global level that promotes (fp8, whose tensor-core sums keep fewer bits than float32; block
    # scales, which change per K block) lets each stage's batch overwrite ``acc_i`` (``fresh``),
    # waits for it, and adds it into ``pacc_i`` times the block's scales; ``acc_i`` = ``pacc_i``
    # before the write. ``behind``: a second partial set ``accb_i`` takes every other slice, so
    # that one slice's additions run while the next slice's batch is on the tensor cores.
    def declare_promoted(self, cfg: WarpgroupStageConfig, d: Dialect, behind: bool = False) -> str:
        f = cfg.fragments
        lines = [f"{d.c_type('f32')} {f.promoted}_{i}[{cfg.tile.acc_regs}];" for i in range(cfg.partition_m)]
        lines += [self.tile.declare_acc(cfg.tile, d, f"{f.behind}_{i}") for i in range(cfg.partition_m) if behind]
        return "\n".join(lines)

    def init_promoted(self, cfg: WarpgroupStageConfig, d: Dialect) -> str:
        sums = cfg.fragments.promoted
        return "\n".join(f"#pragma unroll\nfor (int r = 0; r < {cfg.tile.acc_regs}; ++r) {sums}_{i}[r] = 0.0f;"
                         for i in range(cfg.partition_m))

    def promotion_factors(self, cfg: WarpgroupStageConfig, row_scale=None, col_scale=None) -> str:
        """Declarations of this unit's factors for `promote`: ``row_scale(row)`` / ``col_scale(col)``
        map a stage-relative row / first column of a 128-column block to a float expression (None:
        no such scale; a warpgroup's columns lie in whole blocks: `check_promotion`). Emit them before the wait, so that their loads overlap the wgmma batch."""
        lines, row = [], self.tile.acc_row(cfg.tile)
        for i in range(cfg.partition_m):
            for dr in (0, 8):
                if row_scale is not None:
                    lines.append(f"const float ps_r{i}_{dr} = {row_scale(f'wg_m0 + {i * 64} + {row} + {dr}')};")
        for q in range(-(-cfg.tile.tile_n // 128)):
            if col_scale is not None:
                lines.append(f"const float ps_c{q} = {col_scale(f'wg_n0 + {128 * q}')};")
        return "\n".join(lines)

    def pin(self, cfg: WarpgroupStageConfig, d: Dialect, acc: str = "") -> str:
        """After a wait: set ``acc``'s registers ("": ``fragments.acc``) are read only from here on
        (see the tile's pin)."""
        acc = acc or cfg.fragments.acc
        return "\n".join(self.tile.pin(cfg.tile, d, f"{acc}_{i}") for i in range(cfg.partition_m))

    def promote(self, cfg: WarpgroupStageConfig, d: Dialect, rows: bool, cols: bool, acc: str = "") -> str:
        """``pacc_i += acc_i`` (set ``acc``, "": ``fragments.acc``) times the factors
        `promotion_factors` declared (``rows`` / ``cols``: which it did); only after the batch that
        wrote them is done."""
        acc, sums = acc or cfg.fragments.acc, cfg.fragments.promoted
        lines = []
        for i in range(cfg.partition_m):
            adds = []
            for reg, dr, c0 in self.tile.acc_registers(cfg.tile):
                # One factor (row scale times column scale, the same product for many registers,
                # computed once) so that each addition is one fused multiply-add: written
                # acc * r * c, C's left-to-right order costs two multiplies and an add each.
                f = " * ".join([f"ps_r{i}_{dr}"] * rows + [f"ps_c{c0 // 128}"] * cols)
                value = f"(float){acc}_{i}[{reg}]" + (f" * ({f})" if f else "")
                adds.append(f"{sums}_{i}[{reg}] += {value};")
            lines.append(roll(adds))
        return "\n".join(lines)

    def take_promoted(self, cfg: WarpgroupStageConfig, d: Dialect) -> str:
        """``acc_i`` = ``pacc_i`` (register moves): what `write` then stores."""
        acc, sums = cfg.fragments.acc, cfg.fragments.promoted
        return "\n".join(f"#pragma unroll\nfor (int r = 0; r < {cfg.tile.acc_regs}; ++r) {acc}_{i}[r] = {sums}_{i}[r];"
                         for i in range(cfg.partition_m))

    # -- a tile's partial sums, when cubes split its K range (batch/split_tail.py) -------------------
    @staticmethod
    def partial_words(cfg: WarpgroupStageConfig) -> int:
        """32-bit words of one cube's partial tile: every unit's accumulators."""
        return cfg.units * cfg.partition_m * cfg.tile.acc_regs

    @staticmethod
    def _partial_vectors(cfg: WarpgroupStageConfig, base: str):
        # Registers in fours, units interleaved (vector v of unit u at word (v * units + u) * 4): a
        # warp's 16-byte accesses cover 512 contiguous bytes. Only this stage reads them back.
        for i in range(cfg.partition_m):
            for r in range(0, cfg.tile.acc_regs, 4):
                v = (i * cfg.tile.acc_regs + r) // 4
                yield i, f"{cfg.fragments.acc}_{i}", r, f"({base}) + ({v * cfg.units} + UNIT_ID % {cfg.units}) * 4"

    @staticmethod
    def _rows_guard(cfg: WarpgroupStageConfig, i: int, rows: str, body: list[str]) -> list[str]:
        """``body`` (partition ``i``'s partial stores or adds) where this warp's 16 rows of it start
        before ``rows`` (the tile's rows inside the problem; "" for all): a decode batch of 16 rows
        in a 64-row tile moves a quarter of the partial sums. Whole warps skip: no divergence."""
        if not rows:
            return body
        first = f"wg_m0 + {i * 64} + (UNIT_ID % {WARPGROUP}) / 32 * 16"
        return [f"if ({first} < {rows}) {{", *body, "}"]

    def store_partial(self, cfg: WarpgroupStageConfig, d: Dialect, base: str, rows: str = "") -> str:
        """Store this unit's accumulators (after `finish` or `take_promoted`) into the partial
        tile at ``base`` (a pointer to `partial_words` 32-bit words); ``rows``: the tile's rows
        inside the problem (an expression; rows past it are never stored, so their sums are skipped)."""
        lines = []
        for i in range(cfg.partition_m):
            body = [d.store_global_v4(p, [f"{acc}[{r + j}]" for j in range(4)], cfg.tile.compute)
                    for at, acc, r, p in self._partial_vectors(cfg, base) if at == i]
            lines += self._rows_guard(cfg, i, rows, [roll(body)])
        return "\n".join(lines)

    def add_partial(self, cfg: WarpgroupStageConfig, d: Dialect, base: str, rows: str = "") -> str:
        """The accumulators += the partial tile at ``base`` (another cube's `store_partial` with the
        same ``rows``)."""
        t, word = d.c_type(cfg.tile.compute), cfg.tile.compute
        lines = []
        for i in range(cfg.partition_m):
            body = ["{ " + f"{t} p0, p1, p2, p3; " + d.load_global_l2_v4(p, ["p0", "p1", "p2", "p3"], word) + " "
                    + " ".join(f"{acc}[{r + j}] += p{j};" for j in range(4)) + " }"
                    for at, acc, r, p in self._partial_vectors(cfg, base) if at == i]
            lines += self._rows_guard(cfg, i, rows, [roll(body)])
        return "\n".join(lines)

    def write(self, cfg, d, writer: Writer) -> str:
        return self._write(cfg, writer, None)

    def write_columns(self, cfg, d, writer: Writer, columns: range) -> str:
        # A warpgroup's columns start at wg_n0, known only when the kernel runs unless there is one
        # warpgroup along n (wg_n0 = 0): then a tile column is the tile's own.
        if cfg.warpgroups_n != 1 or columns.start % 8 or columns.stop % 8:
            raise SetupError(self.name, f"column parts need one warpgroup along n and 8-column bounds "
                                        f"(warpgroups_n={cfg.warpgroups_n}, columns {columns.start}..{columns.stop - 1})")
        return self._write(cfg, writer, columns)

    def _write(self, cfg, writer: Writer, columns: range | None) -> str:
        lines = []
        for i in range(cfg.partition_m):
            acc = f"{cfg.fragments.acc}_{i}"
            elements = (self.tile.acc_elements(cfg.tile, acc) if columns is None
                        else self.tile.acc_elements(cfg.tile, acc, columns=columns))
            # A loop over the registers where the stores differ only in affine indices.
            lines.append(stores(writer, [writer(f"wg_m0 + {i * 64} + {row}", f"wg_n0 + {col}", value)
                                         for row, col, value in elements]))
        return "\n".join(line for line in lines if line)
