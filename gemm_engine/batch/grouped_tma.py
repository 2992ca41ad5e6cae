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
  group's end); a group's last, partial tile is stored directly, bounds-checked, as the writer
  does where a call's output is not aligned for TMA.

So no map depends on the routing: one encoding per call (cached per address by the encoder), no
per-group maps and no device-side map updates, which a ragged M never needs (a ragged K would: its
reduction must read zeros past a group's slice, so the "k" layout runs on the portable level).
Clusters (rhs slots multicast to two cubes of tiles one above the other) and the split tail (a
last wave split along K, sized on the host) are refused: both plan the tiles on the host.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..codegen.signature import KernelSignature, array, index
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import CubeScope
from .group_walk import GROUPS, groups_word, tile_bound
from .grouped import (GroupedBatchConfig, check_grouped, check_read_widths, group_origin, group_pointers, group_scope,
                      walk_for)
from .tma_persistent import OUT_FLAG, TmaPersistentBatchMatmul


class GroupedTmaBatchMatmul(TmaPersistentBatchMatmul):
    name = "grouped_tma_batch"
    group_layouts = frozenset({"contiguous", "masked"})

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
        cfg = GroupedBatchConfig(global_=base.global_, dispatch=base.dispatch,
                                 persistent_cubes=base.persistent_cubes, walk=None)
        return replace(cfg, walk=walk_for(problem, cfg))

    def cube_count(self, cfg: GroupedBatchConfig, problem: MatmulProblem) -> int:
        stage = cfg.global_.stage
        return max(1, min(tile_bound(problem, stage.stage_m, stage.stage_n), cfg.persistent_cubes))

    def signature(self, cfg: GroupedBatchConfig) -> KernelSignature:
        return super().signature(cfg).extended(array(f"{GROUPS}_base", groups_word(cfg.layout)),
                                               *index(f"{GROUPS}_offset"))

    def scope(self, cfg: GroupedBatchConfig, d: Dialect | None = None) -> CubeScope:
        s = group_scope(cfg)
        rows = "0" if cfg.layout == "contiguous" else "(int)b"     # the lhs and out maps' batch coordinate
        out = s.out
        if self._out_map(cfg):
            whole = f"({OUT_FLAG} && cube_m0 + {cfg.global_.stage.stage_m} <= group_hi)"
            out = replace(out, tensor_map="out_map", batch=rows, map_flag=whole)
        return replace(s, lhs=replace(s.lhs, tensor_map="lhs_map", batch=rows),
                       rhs=replace(s.rhs, tensor_map="rhs_map", batch="(int)b"), out=out,
                       tiles=((lambda body, first="0", step=1, slices="": self.tile_loop(cfg, d, body, first, step, slices))
                              if d is not None else None))

    def pointers(self, cfg: GroupedBatchConfig, d: Dialect) -> list[str]:
        g = cfg.global_
        return group_pointers(cfg, d, d.storage_type(g.lhs_loader.operand.element),
                              d.storage_type(g.rhs_loader.operand.element))

    def tile_loop(self, cfg: GroupedBatchConfig, d: Dialect, body: str, first: str = "0", step: int = 1,
                  slices: str = "") -> str:
        """The group walk over this cube's tiles; ``first``, ``step``: of them, the ``first``-th and
        every ``step``-th after it (ping-pong copies)."""
        start = "CUBE_ID" if first == "0" else f"CUBE_ID + ({first}) * CUBE_COUNT"
        stride = "CUBE_COUNT" if step == 1 else f"{step} * CUBE_COUNT"
        return cfg.walk.loop(start, stride, [*self.pointers(cfg, d), *group_origin(cfg)], body,
                             lambda scope: scope.call())

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
