"""Plane-partitioned stage: every plane (warp) owns ``partition_m x partition_n`` plane-scoped tiles.

Planes are laid out row-major over the stage (``planes_m x planes_n``); plane p covers rows
``(p / planes_n) * partition_m * tile_m`` onwards and columns ``(p % planes_n) * partition_n *
tile_n`` onwards. For every k tile of the stage a plane reads its ``partition_m`` lhs fragments,
then walks the n tiles of its partition with the rhs fragment double-buffered: the fragment of
n tile j+1 is requested from shared memory before the ``partition_m`` tile matmuls of n tile j are
issued, so its latency hides behind them.

With ``fragment_buffering`` (a selection field, off by default) a plane instead keeps two sets of
fragments: every fragment of k tile kt+1 (rhs fragments two n tiles per ``ldmatrix.x4`` where the
tile's ``load_rhs_pair`` has one) is requested before the partition_m x partition_n tile matmuls of k
tile kt, so shared-memory latency hides behind a whole k tile of tensor-core work (it costs one
more set of fragment registers). Same events, each load's event right after it.

Carried fragments (`CARRIED_FRAGMENTS`, asked for by a ring-keeping global level: `Carry`): with
fragment buffering and an even number of k tiles, the first k tile's fragments of the *next* ring
slot are loaded during this slot's last k tile, after the global level's handover code (its wait
for that slot and its barrier), so a plane always has tile matmuls to issue across the barrier:
its latency and the next slot's first shared-memory reads hide behind the last k tile's tensor-core
work (as CUTLASS's multistage main loop does; measured on the H100 in
bench/results/h100/float64.md, notes). ``load_first`` loads them for the first slot, before
the loop. The loads of the next slot's first k tile fire their events where they run, inside this
slot's last k tile; ``load_first``'s fire none.

Swizzled rows (``smem_swizzle``, a selection field, off by default): the operands' rows are stored
unpadded with their 16-byte chunks XOR-permuted (tile/swizzle.py), which ldmatrix reads without bank
conflicts as the padded rows are; a 128 x 128 x 32 16-bit ring then takes 3 slots in 48 KiB instead of
2. The loaders must write that layout: the config then requires `XOR_SWIZZLED_SMEM` of both
(`config_requirements`, checked by the global level at setup), and the tile must read every element
through `SmemTile` (``reads_swizzled``).

Events (in execution order): ``Begin``; per k tile ``LhsLoaded`` once per lhs fragment (n = k tiles
* partition_m), ``RhsLoaded`` once per rhs fragment (n = k tiles * partition_n) and
``TileMatmulCompleted`` after each tile matmul (n = k tiles * partition_m * partition_n); ``Finish``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..compose.capabilities import (CARRIED_FRAGMENTS, GLOBAL_LAYOUT_SMEM, K_MAJOR_SMEM, PLANE_SCOPE, SMEM_STAGE,
                                    XOR_SWIZZLED_SMEM)
from ..dtypes import WORD_BYTES
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..tile.base import SmemTile
from ..tile.swizzle import ChunkSwizzle, swizzle_refusal
from .base import Carry, StageConfig, StageMatmul, Writer, stores
from .events import (Begin, Finish, LhsLoaded, RhsLoaded, StageEvent, StageEventListener,
                     TileMatmulCompleted)

# Pad shared-memory rows by 8 elements. For 16-bit operands a row stays a multiple of 16 bytes
# (ldmatrix reads 16-byte aligned rows) and consecutive k rows start 4 banks apart, so the 8 rows of
# one ldmatrix block hit 8 distinct 4-bank groups. For tf32 (32-bit, scalar reads) ld = 8 mod 32
# words puts lane (g, t)'s element (t, g) on bank 8t + g: all 32 lanes distinct.
# A tile whose elements need other padding says so in its config (``smem_pad``: the f64 DMMA tile
# pads by 4 doubles, see tile/dmma.py).
SMEM_PAD = 8
#: Units of a plane where the tile does not say otherwise (`TileConfig.plane`: AMD's wave64, Intel's
#: sub-groups of 8 or 16).
PLANE = 32
# Accumulator registers per lane beyond which the partition would spill (`TileConfig.acc_regs`
# per tile: 4 for a 16 x 8 f32 tile and an 8 x 8 f64 one, 8 for a 16 x 8 f64 one).
_MAX_ACC_REGS = 128


@dataclass(frozen=True)
class PlaneStageConfig(StageConfig):
    planes_m: int = 1
    planes_n: int = 1
    partition_m: int = 1
    partition_n: int = 1
    fragment_buffering: bool = False
    smem_swizzle: bool = False

    @property
    def k_tiles(self) -> int:
        return self.stage_k // self.tile.tile_k

    @property
    def lhs_swizzle(self) -> ChunkSwizzle | None:
        """The lhs rows' swizzle (None: padded rows)."""
        return self._swizzle(self.lhs_ld)

    @property
    def rhs_swizzle(self) -> ChunkSwizzle | None:
        return self._swizzle(self.rhs_ld)

    def _swizzle(self, ld: int) -> ChunkSwizzle | None:
        if not self.smem_swizzle:
            return None
        size = WORD_BYTES[self.tile.smem_word]
        return ChunkSwizzle(ld * size, size, self.tile.swizzle_reads or "ldmatrix")

    def lhs_tile(self, smem: str, k: str, origin: str) -> SmemTile:
        """The lhs tile at k row ``k`` and first m ``origin`` of the stage at ``smem``."""
        return SmemTile(smem, self.lhs_ld, k, origin, self.lhs_k_contiguous, self.lhs_swizzle)

    def rhs_tile(self, smem: str, k: str, origin: str) -> SmemTile:
        return SmemTile(smem, self.rhs_ld, k, origin, self.rhs_k_contiguous, self.rhs_swizzle)


class PlanePartitionedStage(StageMatmul):
    name = "plane_partitioned_stage"
    provides = frozenset({SMEM_STAGE, CARRIED_FRAGMENTS})
    knobs = (Knob("planes_m", 2, "planes per cube along m"),
             Knob("planes_n", 4, "planes per cube along n"),
             Knob("partition_m", 4, "tiles per plane along m"),
             Knob("partition_n", 4, "tiles per plane along n"),
             Knob("stage_k", 16, "k per shared-memory stage"),
             Knob("fragment_buffering", False, "load the next k tile's fragments during this one's tile matmuls"),
             Knob("smem_swizzle", False, "unpadded shared-memory rows, 16-byte chunks XOR-swizzled (the loaders "
                                         "must write them so)"))
    requires = (Requirement.of("tile", PLANE_SCOPE),
                Requirement.of("lhs_loader", K_MAJOR_SMEM, GLOBAL_LAYOUT_SMEM),
                Requirement.of("rhs_loader", K_MAJOR_SMEM, GLOBAL_LAYOUT_SMEM))
    #: The stage's extent, derived from the knobs (a selection has them as read-only properties).
    selection_properties = {"stage_m": lambda s: s.planes_m * s.partition_m * s.tile_m,
                            "stage_n": lambda s: s.planes_n * s.partition_n * s.tile_n}

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect, lhs_k_contiguous: bool = False,
              rhs_k_contiguous: bool = False) -> PlaneStageConfig:
        if self.tile.scope != "plane":
            raise SetupError(self.name, f"tile {self.tile.name!r} is {self.tile.scope}-scoped; "
                                        f"a plane-partitioned stage runs plane tiles")
        if (lhs_k_contiguous or rhs_k_contiguous) and not self.tile.reads_k_contiguous:
            raise SetupError(self.name, f"the loaders store an operand k-contiguous, which tile "
                                        f"{self.tile.name!r} does not read (it reads k-major stages)")
        tile_cfg = self.tile.setup(problem, selection, dialect)
        pm, pn = selection.partition_m, selection.partition_n
        plm, pln, sk = selection.planes_m, selection.planes_n, selection.stage_k
        self._check_positive(partition_m=pm, partition_n=pn, planes_m=plm, planes_n=pln, stage_k=sk)
        if sk % tile_cfg.tile_k:
            raise SetupError(self.name, f"stage_k={sk} is not a multiple of tile_k={tile_cfg.tile_k}")
        if pm * pn * tile_cfg.acc_regs > _MAX_ACC_REGS:
            raise SetupError(self.name, f"partition {pm}x{pn} needs {pm * pn * tile_cfg.acc_regs} accumulator "
                                        f"registers per lane (at most {_MAX_ACC_REGS} without spilling)")
        units = self._groups_units(plm * pln, "planes", tile_cfg.plane, dialect)
        sm, sn = plm * pm * tile_cfg.tile_m, pln * pn * tile_cfg.tile_n
        # The orientation is the loaders' (k-major for task loaders; as stored in global memory for
        # chunk loaders, so they copy 16-byte chunks straight through). The padding keeps ldmatrix
        # conflict-free either way: a row of stage_k + 8 halves (stage_k a multiple of 16) puts the
        # 8 rows of one 8 x 8 block on 8 distinct 4-bank groups.
        lhs_kc, rhs_kc = lhs_k_contiguous, rhs_k_contiguous
        swizzle = bool(selection.smem_swizzle)
        pad = 0 if swizzle else tile_cfg.smem_pad or SMEM_PAD
        lhs_ld, rhs_ld = (sk if lhs_kc else sm) + pad, (sk if rhs_kc else sn) + pad
        if swizzle:
            self._check_swizzle(tile_cfg, lhs_ld, rhs_ld)
        return PlaneStageConfig(tile=tile_cfg, stage_m=sm, stage_n=sn, stage_k=sk, units=units,
                                lhs_ld=lhs_ld, rhs_ld=rhs_ld,
                                lhs_k_contiguous=lhs_kc, rhs_k_contiguous=rhs_kc, planes_m=plm,
                                planes_n=pln, partition_m=pm, partition_n=pn,
                                fragment_buffering=selection.fragment_buffering, smem_swizzle=swizzle)

    def _check_swizzle(self, tile_cfg, lhs_ld: int, rhs_ld: int) -> None:
        """SetupError unless the tile reads swizzled rows and both operands' rows can be swizzled."""
        if not self.tile.reads_swizzled:
            raise SetupError(self.name, f"smem_swizzle=True: tile {self.tile.name!r} does not read swizzled "
                                        f"rows (its shared-memory reads do not all go through SmemTile)")
        size = WORD_BYTES.get(tile_cfg.smem_word)
        if size is None or 16 % size:
            raise SetupError(self.name, f"smem_swizzle=True: no 16-byte chunks of {tile_cfg.smem_word} elements")
        for operand, ld in (("lhs", lhs_ld), ("rhs", rhs_ld)):
            why = swizzle_refusal(ld * size)
            if why:
                raise SetupError(self.name, f"smem_swizzle=True: the {operand} stage has {why}")

    def config_requirements(self, cfg: PlaneStageConfig) -> tuple[Requirement, ...]:
        """Swizzled rows need loaders that write them (`XOR_SWIZZLED_SMEM`)."""
        if not cfg.smem_swizzle:
            return ()
        why = "smem_swizzle=True: the stage reads XOR-swizzled rows"
        return (Requirement.of("lhs_loader", XOR_SWIZZLED_SMEM, why=why),
                Requirement.of("rhs_loader", XOR_SWIZZLED_SMEM, why=why))

    def declare(self, cfg: PlaneStageConfig, d: Dialect) -> str:
        t, tc = self.tile, cfg.tile
        lines = [
            self.region(cfg),
            t.declare_lanes(tc, d),
            f"const int plane_m0 = ((UNIT_ID / {tc.plane}) / {cfg.planes_n}) * {cfg.partition_m * tc.tile_m};",
            f"const int plane_n0 = ((UNIT_ID / {tc.plane}) % {cfg.planes_n}) * {cfg.partition_n * tc.tile_n};",
        ]
        lines += [t.declare_acc(tc, d, f"acc_{i}_{j}")
                  for i in range(cfg.partition_m) for j in range(cfg.partition_n)]
        if cfg.fragment_buffering:
            lines += [t.declare_lhs(tc, d, f"lhs_frag_{b}_{i}") for b in range(2) for i in range(cfg.partition_m)]
            lines += [t.declare_rhs(tc, d, f"rhs_frag_{b}_{j}") for b in range(2) for j in range(cfg.partition_n)]
            return "\n".join(lines)
        lines += [t.declare_lhs(tc, d, f"lhs_frag_{i}") for i in range(cfg.partition_m)]
        lines += [t.declare_rhs(tc, d, f"rhs_frag_{b}") for b in range(min(2, cfg.partition_n))]
        return "\n".join(lines)

    def _set_loads(self, cfg: PlaneStageConfig, d: Dialect, lhs_smem: str, rhs_smem: str, kt: int,
                   events: bool = True) -> list[tuple[str, StageEvent | None]]:
        """(code, event) of loading k tile ``kt``'s fragments into set ``kt % 2`` (rhs fragments two
        n tiles per ``ldmatrix.x4`` where the tile's ``load_rhs_pair`` has one)."""
        t, tc = self.tile, cfg.tile
        pm, pn, nk = cfg.partition_m, cfg.partition_n, cfg.k_tiles
        b, k = kt % 2, str((kt % nk) * tc.tile_k)
        out = []
        for i in range(pm):
            src = cfg.lhs_tile(lhs_smem, k, f"plane_m0 + {i * tc.tile_m}")
            out.append((t.load_lhs(tc, d, f"lhs_frag_{b}_{i}", src), LhsLoaded(kt % nk * pm + i, nk * pm)))
        j = 0
        while j < pn:
            src = cfg.rhs_tile(rhs_smem, k, f"plane_n0 + {j * tc.tile_n}")
            code = t.load_rhs_pair(tc, d, f"rhs_frag_{b}_{j}", f"rhs_frag_{b}_{j + 1}", src) if j + 1 < pn else ""
            if code:
                out += [(code, RhsLoaded(kt % nk * pn + j, nk * pn)), ("", RhsLoaded(kt % nk * pn + j + 1, nk * pn))]
                j += 2
            else:
                out.append((t.load_rhs(tc, d, f"rhs_frag_{b}_{j}", src), RhsLoaded(kt % nk * pn + j, nk * pn)))
                j += 1
        return out if events else [(code, None) for code, _ in out]

    def _buffered_steps(self, cfg: PlaneStageConfig, d: Dialect, lhs_smem: str, rhs_smem: str,
                        carry: Carry | None = None) -> list[list[tuple[str, StageEvent | None]]]:
        """Steps of every k tile with fragment buffering: k tile kt loads set (kt + 1) % 2 (the
        fragments of k tile kt + 1, the first k tile's loads running ahead of it) and computes on
        set kt % 2. Set b of k tile kt is only overwritten by the loads in k tile kt + 1, after
        its last tile matmul was issued (mma.sync reads its registers at issue). With ``carry``
        the first k tile's set is already loaded, and the last k tile loads the next slot's first
        (set nk % 2 = 0) after the handover."""
        t, tc = self.tile, cfg.tile
        pm, pn, nk = cfg.partition_m, cfg.partition_n, cfg.k_tiles
        tiles = []
        for kt in range(nk):
            steps = self._set_loads(cfg, d, lhs_smem, rhs_smem, 0) if kt == 0 and carry is None else []
            if kt + 1 < nk:
                steps += self._set_loads(cfg, d, lhs_smem, rhs_smem, kt + 1)
            elif carry is not None:
                # Each load guarded on its own, so a listener's code after it runs on every slot.
                steps.append((carry.handover, None))
                steps += [(f"if ({carry.more}) {{\n{code}\n}}" if code else code, ev)
                          for code, ev in self._set_loads(cfg, d, carry.lhs_next, carry.rhs_next, nk)]
            b = kt % 2
            for j in range(pn):
                for i in range(pm):
                    code = t.execute(tc, d, f"lhs_frag_{b}_{i}", f"rhs_frag_{b}_{j}", f"acc_{i}_{j}")
                    steps.append((code, TileMatmulCompleted((kt * pn + j) * pm + i, nk * pm * pn)))
            tiles.append(steps)
        return tiles

    def carry_refusal(self, cfg: PlaneStageConfig) -> str | None:
        """Why this config cannot carry fragments across ring slots (None: it can)."""
        if not cfg.fragment_buffering:
            return "it carries fragments only with fragment_buffering=True"
        if cfg.k_tiles % 2:
            return (f"stage_k={cfg.stage_k} holds {cfg.k_tiles} k tiles of {cfg.tile.tile_k}; carried "
                    f"fragments need an even number (the next slot's first set is set 0)")
        return None

    def load_first(self, cfg: PlaneStageConfig, d: Dialect, lhs_smem: str, rhs_smem: str) -> str:
        """Carried fragments: the first slot's first k tile, loaded before the ring loop."""
        return "\n".join(code for code, _ in self._set_loads(cfg, d, lhs_smem, rhs_smem, 0, events=False) if code)

    def init_accumulators(self, cfg, d):
        return "\n".join(self.tile.init_acc(cfg.tile, d, f"acc_{i}_{j}")
                         for i in range(cfg.partition_m) for j in range(cfg.partition_n))

    def _k_tile(self, cfg: PlaneStageConfig, d: Dialect, lhs_smem: str, rhs_smem: str,
                k: str, kt: int) -> list[tuple[str, StageEvent]]:
        """(code, event that follows it) for every step of k tile ``kt`` whose first k row is ``k``."""
        t, tc = self.tile, cfg.tile
        pm, pn, nk = cfg.partition_m, cfg.partition_n, cfg.k_tiles

        def rhs_load(j: int) -> tuple[str, StageEvent]:
            src = cfg.rhs_tile(rhs_smem, k, f"plane_n0 + {j * tc.tile_n}")
            return t.load_rhs(tc, d, f"rhs_frag_{j % 2}", src), RhsLoaded(kt * pn + j, nk * pn)

        steps = []
        for i in range(pm):
            src = cfg.lhs_tile(lhs_smem, k, f"plane_m0 + {i * tc.tile_m}")
            steps.append((t.load_lhs(tc, d, f"lhs_frag_{i}", src), LhsLoaded(kt * pm + i, nk * pm)))
        steps.append(rhs_load(0))
        for j in range(pn):
            if j + 1 < pn:
                steps.append(rhs_load(j + 1))  # double buffer: the next fragment is in flight
            for i in range(pm):
                code = t.execute(tc, d, f"lhs_frag_{i}", f"rhs_frag_{j % 2}", f"acc_{i}_{j}")
                steps.append((code, TileMatmulCompleted((kt * pn + j) * pm + i, nk * pm * pn)))
        return steps

    def execute(self, cfg, d, lhs_smem, rhs_smem, listener: StageEventListener, carry: Carry | None = None) -> str:
        nk, tk = cfg.k_tiles, cfg.tile.tile_k
        refusal = self.carry_refusal(cfg) if carry is not None else None
        if refusal:      # the global level asks at setup; a user's global level may not have
            raise SetupError(self.name, f"asked to carry fragments: {refusal}")
        if cfg.fragment_buffering:
            unrolled = self._buffered_steps(cfg, d, lhs_smem, rhs_smem, carry)
        else:
            unrolled = [self._k_tile(cfg, d, lhs_smem, rhs_smem, str(kt * tk), kt) for kt in range(nk)]
        # Ask in execution order, so a listener sees the events as the kernel will run them.
        begin = listener.on_event(Begin())
        injected = [[listener.on_event(ev) if ev is not None else "" for _, ev in steps] for steps in unrolled]
        finish = listener.on_event(Finish())
        out = [begin] if begin else []
        if not cfg.fragment_buffering and not any(code for per_tile in injected for code in per_tile):
            # Nothing to interleave: a k-tile loop (unrolled by the compiler) keeps sources small.
            body = self._k_tile(cfg, d, lhs_smem, rhs_smem, f"kt * {tk}", 0)
            out += [f"#pragma unroll\nfor (int kt = 0; kt < {nk}; ++kt) {{", *(c for c, _ in body), "}"]
        else:
            for steps, extra in zip(unrolled, injected):
                for (code, _), inject in zip(steps, extra):
                    if code:
                        out.append(code)
                    if inject:
                        out.append(inject)
        if finish:
            out.append(finish)
        return "\n".join(out)

    def write(self, cfg, d, writer: Writer) -> str:
        tc = cfg.tile
        lines = [self.tile.write_prologue(tc, d, cfg.planes_m * cfg.planes_n)]
        for i in range(cfg.partition_m):
            for j in range(cfg.partition_n):
                lines.append(self.tile.stage_accumulator(tc, d, f"acc_{i}_{j}"))
                lines.append(stores(writer, [writer(f"plane_m0 + {i * tc.tile_m} + {row}",
                                                    f"plane_n0 + {j * tc.tile_n} + {col}", value)
                                             for row, col, value in self.tile.acc_elements(tc, f"acc_{i}_{j}")]))
        return "\n".join(line for line in lines if line)
