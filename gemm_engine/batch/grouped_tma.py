"""Grouped TMA batch matmul: the grouped tile walk (batch/group_walk.py) as the persistent tile loop of
the Hopper warp-specialized pipeline (global_/tma_specialized.py), with the operands' tensor maps.

It is `TmaPersistentBatchMatmul` (one cube per multiprocessor, each role of a cube walking the same
tiles: `PERSISTENT_TILE_LOOP`; maps as kernel parameters: `TENSOR_MAPS`, `OUTPUT_TENSOR_MAP`) whose
loop is the group walk, for the "contiguous" and "masked" layouts. The tensor maps: one per operand,
encoded on the host per call from what the host knows, never from the extents:

* lhs: contiguous, the whole (M, K) token matrix: a tile's rows are absolute (the group's first row
  plus the tile's), so a tile that ends past its group's last row reads the next group's rows
  (or TMA's zeros past M) into rows whose outputs are never stored; masked, the (groups, M, K)
  slab with the group as the batch coordinate, zeros past M;
* rhs: the (groups, K, N) weights, the group as the batch coordinate;
* out: the (M, N) or (groups, M, N) output. TMA stores write whole boxes, so a tile stores through
  the map only where it lies wholly inside its group (``out_tma`` and the tile's last row below the
  group's end); a group's last, partial tile goes through the staging tile too and its units copy
  the rows inside the group from there (``OperandRef.staging_flag``); where a call's output is not
  aligned for TMA, every tile is stored directly, bounds-checked.

So no map of these layouts depends on the routing: one encoding per call (cached per address by
the encoder), no per-group maps. The "k" layout (a weight gradient: the reduction grouped) is the
exception: a group's reduction must read zeros past its slice, where the next group's tokens lie.
Its tiles read both operands at K coordinates from the group's first index (`CubeScope.k_origin`),
and the unit issuing the copies keeps its own copies of both maps in the kept scratch (after the
split tail's flags, which it leaves zero for the kernels that share the queue's buffer), their K
extent set to the group's end on the device (`Dialect.tensor_map_extent`) whenever its tiles move
to another group: TMA's zero fill then ends each slice at the group's end, with no host sync (a
CUDA graph replays with new routing). Copies in flight may still read a map the unit has replaced,
so each unit rotates through `_MAP_SLOTS_MORE` more map slots than its ring has stages: a slot is
rewritten only after every copy through it has landed (each slot in use has at least one copy,
and at most ``stages`` are in flight). The global level must take a reduction per tile
(`RAGGED_REDUCTION`).

Clusters (rhs slots multicast to two cubes of tiles one above the other) and the split tail (a
last wave split along K, sized on the host) are refused: both plan the tiles on the host.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..codegen.signature import KernelSignature, array, index
from ..compose.capabilities import RAGGED_REDUCTION
from ..dtypes import FLOAT32
from ..errors import SetupError
from ..problem import MatmulProblem
from ..runtime.tensor_map import MAP_BYTES
from . import split_tail
from .base import KEPT_SCRATCH, CubeScope, Workspace
from .group_walk import GROUPS, groups_word, tile_bound
from .grouped import (GroupedBatchConfig, check_grouped, check_read_widths, group_origin, group_pointers, group_scope,
                      walk_for)
from .tma_persistent import OUT_FLAG, TmaPersistentBatchMatmul

#: Map slots of a unit beyond its ring's stages (see the module docstring), each holding both
#: operands' maps.
_MAP_SLOTS_MORE = 1
_SLOT_BYTES = 2 * MAP_BYTES


class GroupedTmaBatchMatmul(TmaPersistentBatchMatmul):
    name = "grouped_tma_batch"
    group_layouts = frozenset({"contiguous", "masked", "k"})

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GroupedBatchConfig:
        check_grouped(self.name, problem, self.global_)
        if problem.k == 0:
            raise SetupError(self.name, "K = 0: a tensor map's extents are at least 1 (a portable level computes "
                                        "the epilogue of zeros)")
        base = super().setup(problem, selection, dialect)
        check_read_widths(self.name, problem, self.global_, base.global_)
        loaders = (base.global_.lhs_loader, base.global_.rhs_loader)
        if any(getattr(ld, "read_lines", 0) for ld in loaders):
            # A group's rows start anywhere in the map: every line of a box is read (tma_loader.py).
            raise SetupError(self.name, "a loader reads only some lines of its tiles, which holds for dense products "
                                        "only (its global level was set up without the problem's groups)")
        request = base.global_.tile_loop
        if request.cluster_m != 1 or request.split_tail > 1:
            raise SetupError(self.name, f"cluster_m={request.cluster_m}, split_tail={request.split_tail}: clusters "
                                        "and split tails plan tiles on the host; a grouped walk finds them on the "
                                        "device (cluster_m=1, split_tail=0)")
        if problem.groups.layout == "k" and not (RAGGED_REDUCTION in self.global_.provides
                                                 and request.ragged_reduction):
            raise SetupError(self.name, f"the 'k' layout gives each tile its group's reduction, which the global "
                                        f"level {self.global_.name} does not take as configured "
                                        f"({RAGGED_REDUCTION.name}: one copy of the consumers, no promotion)")
        cfg = GroupedBatchConfig(global_=base.global_, dispatch=base.dispatch,
                                 persistent_cubes=base.persistent_cubes, walk=None)
        return replace(cfg, walk=walk_for(problem, cfg))

    def _map_slots(self, cfg: GroupedBatchConfig) -> int:
        """Map slots of each cube's loading unit ("k" layout; module docstring)."""
        return cfg.global_.stages + _MAP_SLOTS_MORE

    @staticmethod
    def _maps_offset(cfg: GroupedBatchConfig) -> int:
        """Words of the kept scratch before the map slots: the split tail's flags on this device,
        which other kernels on the queue keep zero (the buffer is the queue's: runtime/base.py
        `kept_scratch`), rounded up to whole 128-byte lines (a map is 64-byte aligned)."""
        line = 128 // FLOAT32.itemsize
        return -(-split_tail.flag_words(cfg.persistent_cubes) // line) * line

    def kept_workspace(self, cfg: GroupedBatchConfig, problem: MatmulProblem) -> Workspace | None:
        if cfg.layout != "k":
            return super().kept_workspace(cfg, problem)
        # The slots are written before they are read (each when its unit moves to a group); the
        # flags before them are left as they are: zero.
        offset = self._maps_offset(cfg)
        words = cfg.persistent_cubes * self._map_slots(cfg) * _SLOT_BYTES // FLOAT32.itemsize
        return Workspace(FLOAT32, offset + words, zeroed=offset)

    def cube_count(self, cfg: GroupedBatchConfig, problem: MatmulProblem) -> int:
        stage = cfg.global_.stage
        return max(1, min(tile_bound(problem, stage.stage_m, stage.stage_n), cfg.persistent_cubes))

    def signature(self, cfg: GroupedBatchConfig) -> KernelSignature:
        kept = (array(KEPT_SCRATCH, "f32", writable=True),) if cfg.layout == "k" else ()
        return super().signature(cfg).extended(array(f"{GROUPS}_base", groups_word(cfg.layout)),
                                               *index(f"{GROUPS}_offset"), *kept)

    def scope(self, cfg: GroupedBatchConfig, d: Dialect | None = None) -> CubeScope:
        s = group_scope(cfg)
        ragged_k = cfg.layout == "k"
        rows = "0" if cfg.layout == "contiguous" else "(int)b"     # the lhs and out maps' batch coordinate
        out = s.out
        if self._out_map(cfg):
            # Masked and contiguous: a tile's rows past its group's are another's (or kept as they were).
            whole = OUT_FLAG if ragged_k else f"({OUT_FLAG} && cube_m0 + {cfg.global_.stage.stage_m} <= group_hi)"
            out = replace(out, tensor_map="out_map", batch=rows, map_flag=whole,
                          staging_flag="" if ragged_k else OUT_FLAG)
        maps = {"lhs": "lhs_map", "rhs": "rhs_map"}
        if ragged_k and d is not None:          # the loading unit's copies (`tile_loop`)
            maps = {"lhs": d.tensor_map_at("lhs_map", "maps_at"), "rhs": d.tensor_map_at("rhs_map", f"maps_at + {MAP_BYTES}")}
        return replace(s, lhs=replace(s.lhs, tensor_map=maps["lhs"], batch="0" if ragged_k else rows),
                       rhs=replace(s.rhs, tensor_map=maps["rhs"], batch="0" if ragged_k else "(int)b"), out=out,
                       k_origin="group_lo" if ragged_k else "0", k_per_tile=ragged_k,
                       tiles=((lambda body, first="0", step=1, slices="", loads=False:
                               self.tile_loop(cfg, d, body, first, step, slices, loads)) if d is not None else None))

    def pointers(self, cfg: GroupedBatchConfig, d: Dialect) -> list[str]:
        g = cfg.global_
        return group_pointers(cfg, d, d.storage_type(g.lhs_loader.operand.element),
                              d.storage_type(g.rhs_loader.operand.element))

    def tile_loop(self, cfg: GroupedBatchConfig, d: Dialect, body: str, first: str = "0", step: int = 1,
                  slices: str = "", loads: bool = False) -> str:
        """The group walk over this cube's tiles; ``first``, ``step``: of them, the ``first``-th and
        every ``step``-th after it (ping-pong copies); ``loads``: the loop of the unit issuing the
        operands' copies, which keeps their maps ("k" layout; module docstring)."""
        start = "CUBE_ID" if first == "0" else f"CUBE_ID + ({first}) * CUBE_COUNT"
        stride = "CUBE_COUNT" if step == 1 else f"{step} * CUBE_COUNT"
        origin = [*self.pointers(cfg, d), *group_origin(cfg)]
        if not (loads and cfg.layout == "k"):
            return cfg.walk.loop(start, stride, origin, body, lambda scope: scope.call())
        slots, g = self._map_slots(cfg), cfg.global_
        level = self.global_
        # Each map's K axis: its first (contiguous) dimension where the operand is K-major.
        dims = {op: 0 if getattr(level, f"{op}_loader").k_contiguous(getattr(g, f"{op}_loader").operand.layout,
                                                                        op == "lhs") else 1 for op in ("lhs", "rhs")}
        retarget = [
            # A new group with a reduction to read: the next slot, both maps ending at its end.
            "if (b != maps_b && group_hi > group_lo) {",
            "maps_b = b;",
            f"maps_turn = maps_turn + 1 == {slots} ? 0 : maps_turn + 1;",
            f"maps_at = maps_base + maps_turn * {_SLOT_BYTES};",
            d.tensor_map_extent("maps_at", "lhs_map", dims["lhs"], "group_hi"),
            d.tensor_map_extent(f"maps_at + {MAP_BYTES}", "rhs_map", dims["rhs"], "group_hi"),
            "}"]
        return "\n".join([
            "{",
            f"unsigned char* const maps_base = (unsigned char*)({KEPT_SCRATCH} + {self._maps_offset(cfg)}) + "
            f"(i64)CUBE_ID * {slots * _SLOT_BYTES};",
            "unsigned char* maps_at = maps_base;",
            "i64 maps_b = -1;",
            "int maps_turn = 0;",
            cfg.walk.loop(start, stride, [*origin, *retarget], body, lambda scope: scope.call()),
            "}"])

    def kernel(self, cfg: GroupedBatchConfig, d: Dialect) -> str:
        size = cfg.result.itemsize
        flag = ([f"const bool {OUT_FLAG} = ((((unsigned long long)(out_base + out_offset)) | (unsigned long long)(out_ld * {size})"
                 f" | (unsigned long long)(batch > 1 ? out_batch_stride * {size} : 0)) & 15) == 0;"]
                if self._out_map(cfg) else [])
        groups = f"const GLOBAL {d.c_type(groups_word(cfg.layout))}* groups = {GROUPS}_base + {GROUPS}_offset;"
        return "\n\n".join([cfg.dispatch.function(self.name), cfg.walk.functions(d),
                            "\n".join([*self.kernel_head(cfg, d), groups, *flag, self.body(cfg, d), "}"])])

    def _out_values(self, cfg: GroupedBatchConfig, values: dict, itemsize: int) -> dict:
        # Contiguous: one (M, N) output (its batch stride is 0), whatever the groups.
        if cfg.layout == "contiguous":
            values = {**values, "batch": 1, "out_batch_stride": 0}
        return super()._out_values(cfg, values, itemsize)
