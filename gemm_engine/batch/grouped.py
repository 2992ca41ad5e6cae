"""Grouped batch matmul: the tile scheduler of grouped problems (mixture-of-experts layers, LoRA
adapters), whose group extents it reads from device memory (problem.py `Groups`).

Each cube (or, persistent, each of about one cube per compute unit, looping) walks the call's
tiles group after group (batch/group_walk.py) and hands its global level, for each, a `CubeScope`
whose operand references point at the group's rows and weights and whose extents are the group's:

* "contiguous" (lhs rows sorted by group): rows are absolute, the scope's M is the group's end row
  and its tile origin the group's first row plus the tile's, so the lhs and the output are read
  where they lie and every per-row term (a routing weight, a per-token scale, ``c``) is indexed by
  the token's row; the rhs and the per-group terms move to the group (``b``);
* "masked" (a (groups, M, K) lhs, each group's first rows in use): a batched product whose M is
  the group's count;
* "k" (the reduction grouped, a weight gradient): every group's tiles, the scope's K the group's
  slice of the reduction, lhs and rhs moved to its first index;
* "list": every group's sizes, operand offsets and leading dimensions from a table.

Quantized experts (quant/experts.py) are a rhs like any other here: the packed words move to the
group's expert as a dense rhs does, and its scales and zeros by strides of their own
(`WeightFormat.group_params`); the quantized global levels read them unchanged.

The global, stage and tile levels are the dense ones, unchanged: they bound-check the ragged axis
(`MatmulProblem.checks`) and read nothing else of the kernel. The grid is a bound on the tiles
(`group_walk.tile_bound`) or, persistent (``persistent`` > 0, a reentrant global level), that many
cubes per compute unit; no extent is read on the host, so a call is captured in a CUDA graph and
replayed with new routing.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..codegen.comments import plain_fields, region
from ..codegen.dialect import Dialect
from ..codegen.signature import KernelSignature, array, index
from ..errors import SetupError
from ..problem import GROUP_LAYOUTS, Layout, MatmulProblem
from .base import BatchConfig, CubeScope, OperandRef
from .group_walk import GROUPS, LIST_FIELDS, GroupWalk, groups_word, tile_bound
from .partitioned import PartitionedBatchMatmul

#: The scope's extents of each layout's tile (C names the walk and `origin` define).
_EXTENTS = {"contiguous": ("group_hi", "N", "K"), "masked": ("group_hi", "N", "K"),
            "k": ("M", "N", "group_k"), "list": ("group_m", "group_n", "group_k")}


@dataclass(frozen=True)
class GroupedBatchConfig(BatchConfig):
    walk: GroupWalk = field(default=None, kw_only=True)

    @property
    def layout(self) -> str:
        return self.walk.layout


def check_grouped(component: str, problem: MatmulProblem, global_) -> None:
    """SetupError for what no grouped level runs: block scales along a ragged reduction, operands a
    tile reads K-major only in the other layout (a grouped level copies no operand)."""
    if problem.groups.layout in ("k", "list") and problem.weights is not None:
        raise SetupError(component, f"quantized experts with the {problem.groups.layout!r} layout: a group's weights "
                                    "are one expert's, in the contiguous and masked layouts")
    if problem.groups.layout in ("k", "list") and problem.epilogue.block_scales:
        raise SetupError(component, f"scales per block of 128 along K with the {problem.groups.layout!r} layout: "
                                    "a group's reduction starts anywhere in a block")
    if global_.requires_k_major(problem) and (Layout(problem.lhs_layout) is not Layout.ROW
                                              or Layout(problem.rhs_layout) is not Layout.COL):
        raise SetupError(component, f"the tile reads {problem.lhs.name} operands K-major only (a row-major lhs, a "
                                    "column-major rhs: weights stored (groups, N, K)), and a grouped level copies "
                                    "no operand")


def check_read_widths(component: str, problem: MatmulProblem, global_, global_cfg) -> None:
    """SetupError for a loader of the global level ``global_`` (configured as ``global_cfg``) that
    reads an operand in vectors wider than every group's origin along its contiguous axis is aligned
    (`MatmulProblem.vector_align`: one element where a group starts anywhere; `LoaderConfig.read_width`):
    on CUDA such a read faults with a misaligned address."""
    for side in ("lhs", "rhs"):
        loader, cfg = getattr(global_, f"{side}_loader"), getattr(global_cfg, f"{side}_loader")
        width, align = cfg.read_width, problem.vector_align(side)
        if width is not None and width > align:
            ragged = " (its contiguous axis is the groups' ragged one)" if problem.ragged_contiguous(side) else ""
            raise SetupError(component, f"the {side} loader ({loader.name}) reads {width} elements at a "
                                         f"time; the {problem.groups.layout!r} layout's groups of the {side} are "
                                         f"aligned to {align}{ragged}")


def walk_for(problem: MatmulProblem, cfg: BatchConfig) -> GroupWalk:
    stage = cfg.global_.stage
    return GroupWalk(problem.groups.layout, stage.stage_m, stage.stage_n)


def group_pointers(cfg: GroupedBatchConfig, d: Dialect, lhs_type: str, rhs_type: str) -> list[str]:
    """Statements declaring ``lhs``, ``rhs``, ``out`` at group ``b`` (and its extents the scope
    names: ``group_k``; list: its leading dimensions), then the epilogue's pointers."""
    g, layout = cfg.global_, cfg.layout
    out_t = d.storage_type(g.out)
    base = {op: f"{op}_base + {op}_offset" for op in ("lhs", "rhs", "out")}
    moved = {op: f"{base[op]} + b * {op}_batch_stride" for op in ("lhs", "rhs", "out")}
    extra = []
    if layout == "contiguous":       # rows absolute: lhs and out where they lie
        at = {"lhs": base["lhs"], "rhs": moved["rhs"], "out": base["out"]}
    elif layout == "masked":
        at = moved
    elif layout == "k":              # the group's slice of the reduction
        lhs_step = "1" if g.lhs_loader.operand.layout is Layout.ROW else "lhs_ld"
        rhs_step = "rhs_ld" if g.rhs_loader.operand.layout is Layout.ROW else "1"
        at = {"lhs": f"{base['lhs']} + group_lo * {lhs_step}", "rhs": f"{base['rhs']} + group_lo * {rhs_step}",
              "out": moved["out"]}
        extra = ["const i64 group_k = group_hi - group_lo;"]
    else:                            # list: the group's table row
        row = {name: f"groups[b * {len(LIST_FIELDS)} + {i}]" for i, name in enumerate(LIST_FIELDS)}
        at = {op: f"{base[op]} + {row[f'{op}_offset']}" for op in ("lhs", "rhs", "out")}
        extra = [f"const i64 group_k = {row['k']};",
                 *(f"const i64 group_{op}_ld = {row[f'{op}_ld']};" for op in ("lhs", "rhs", "out"))]
    return [*extra,
            f"const GLOBAL {lhs_type}* lhs = {at['lhs']};",
            f"const GLOBAL {rhs_type}* rhs = {at['rhs']};",
            f"GLOBAL {out_t}* out = {at['out']};",
            *g.epilogue.pointers(d), *(g.weights.pointers(d, "b") if g.weights is not None else ())]


def group_scope(cfg: GroupedBatchConfig) -> CubeScope:
    """The references and extents of a group's tile (maps and loops are the caller's to add)."""
    m, n, k = _EXTENTS[cfg.layout]
    lds = {op: f"group_{op}_ld" if cfg.layout == "list" else f"{op}_ld" for op in ("lhs", "rhs", "out")}
    return CubeScope(lhs=OperandRef("lhs", lds["lhs"]), rhs=OperandRef("rhs", lds["rhs"]),
                     out=OperandRef("out", lds["out"]), m=m, n=n, k=k)


def group_origin(cfg: GroupedBatchConfig) -> list[str]:
    """The tile's origin: its first row (contiguous: the group's first row on) and column."""
    stage = cfg.global_.stage
    first = "group_lo + " if cfg.layout == "contiguous" else ""
    return [f"const i64 cube_m0 = {first}cube_row * {stage.stage_m};",
            f"const i64 cube_n0 = cube_col * {stage.stage_n};"]


class GroupedBatchMatmul(PartitionedBatchMatmul):
    """The portable grouped level: any global level, CUDA and OpenCL (see the module docstring)."""

    name = "grouped_batch"
    group_layouts = frozenset(GROUP_LAYOUTS)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GroupedBatchConfig:
        check_grouped(self.name, problem, self.global_)
        base = super().setup(problem, selection, dialect)
        check_read_widths(self.name, problem, self.global_, base.global_)
        cfg = GroupedBatchConfig(global_=base.global_, dispatch=base.dispatch,
                                 persistent_cubes=base.persistent_cubes, walk=None)
        return replace(cfg, walk=walk_for(problem, cfg))

    def cube_count(self, cfg: GroupedBatchConfig, problem: MatmulProblem) -> int:
        stage = cfg.global_.stage
        bound = max(1, tile_bound(problem, stage.stage_m, stage.stage_n))
        return min(bound, cfg.persistent_cubes) if cfg.persistent_cubes else bound

    def signature(self, cfg: GroupedBatchConfig) -> KernelSignature:
        weights = cfg.global_.weights
        return super().signature(cfg).extended(array(f"{GROUPS}_base", groups_word(cfg.layout)),
                                               *index(f"{GROUPS}_offset"),
                                               *(weights.group_params() if weights is not None else ()))

    def scope(self, cfg: GroupedBatchConfig, d: Dialect | None = None) -> CubeScope:
        return group_scope(cfg)

    def cube_index(self, cfg: BatchConfig) -> list[str]:
        return []        # the walk's loop declares ``cube``

    def pointers(self, cfg: GroupedBatchConfig, d: Dialect) -> list[str]:
        g = cfg.global_
        return group_pointers(cfg, d, d.storage_type(g.lhs_loader.operand.element),
                              d.storage_type(g.rhs_loader.operand.element))

    def kernel(self, cfg: GroupedBatchConfig, d: Dialect) -> str:
        persistent = cfg.persistent_cubes > 0
        head = self.kernel_head(cfg, d)
        head[2] = region("batch", self, cfg, f"| walk {plain_fields(cfg.walk)} | dispatch {cfg.dispatch.name} "
                                             f"{plain_fields(cfg.dispatch)}".rstrip())
        loop = cfg.walk.loop(
            "CUBE_ID", "CUBE_COUNT", [*self.pointers(cfg, d), *group_origin(cfg)], self.body(cfg, d),
            lambda scope: [cfg.dispatch.define(scope, self.name)],
            # Between two tiles no unit may load the next tile's slices another unit still reads.
            between=["SYNC_CUBE();"] if persistent else None, once=not persistent)
        return "\n".join([cfg.walk.functions(d), *head,
                          f"const GLOBAL {d.c_type(groups_word(cfg.layout))}* groups = {GROUPS}_base + {GROUPS}_offset;",
                          loop, "}"])

