"""Persistent TMA batch level: about one cube per multiprocessor, each looping over output tiles in
the dispatch order, with each operand's TMA tensor map as a kernel parameter.

It provides what the warp-specialized Hopper global level needs (global_/tma_specialized.py):

* `PERSISTENT_TILE_LOOP`: the scope's ``tiles(body)`` renders the loop over this cube's tiles
  (``CUBE_ID``, ``CUBE_ID + CUBE_COUNT``, ...; each mapped by the dispatch order to a batch entry and
  tile origin, with the output and epilogue pointers of that entry) around ``body``. The global level
  renders it once per warp role, so producer and consumers walk the same tiles in the same order
  with no barrier between them: the global level must run the loop itself (`OWN_TILE_LOOP`).
* `TENSOR_MAPS`: ``lhs_map`` / ``rhs_map`` (128-byte ``__grid_constant__`` parameters, codegen/signature.py
  ``by_value``) appended to the partitioned signature, encoded per call from the operand's address,
  extents, leading dimension and batch stride by its `TmaLoader` (`call_values`). The scope tells
  the loaders each map and the batch coordinate (0 for a broadcast operand, batch stride 0).

The grid is ``min(tiles, multiprocessors)``: one cube per multiprocessor (the global level's
occupancy is 1), so no cube waits for a slot while another holds a multiprocessor idle.

The dispatch order is rendered once, as a function (`Dispatch.function`) that each role's tile
loop calls.

What the global level asks of the loop is its config's `TileLoopRequest` (``tile_loop``); whether
the writer stores through the output's tensor map, its config's ``tma_store``.

Clusters: where the global level's config asks for ``cluster_m`` > 1 (cubes sharing rhs slots by
multicast), the kernel is declared with that cluster shape, the grid is a multiple of it (clusters
of consecutive cube ids), and the loop walks *cluster tiles*: the dispatch order maps over
``ceil(cubes_m / cluster_m)`` rows of them, and the cube of rank r takes row ``cluster_m * row + r``
of the cluster tile's column. Every cube of a cluster so walks the same number of tiles of the same
rhs block; a rank whose row is past M (odd tile rows) computes on TMA's zero fill and stores nothing.
The scope says so (`CubeScope.cluster_m`, ``cluster_rank``), and the global level checks it.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..runtime.tensor_map import ENCODER, MAP_ALIGN, MAP_BYTES
from ..compose.capabilities import OUTPUT_TENSOR_MAP, OWN_TILE_LOOP, PERSISTENT_TILE_LOOP, TENSOR_MAPS
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from ..dtypes import FLOAT32
from . import split_tail
from .base import (KEPT_SCRATCH, KERNEL_NAME, BatchConfig, CallValues, CubeScope, DispatchScope, Launch, OperandRef,
                   Workspace, dispatch_for)
from .partitioned import PartitionedBatchMatmul
from ..codegen.signature import BY_VALUE, KernelSignature, Param, array

_MAPS = ("lhs_map", "rhs_map")
#: The kernel's condition that this call's output map may be used (`out_usable` on the device).
OUT_FLAG = "out_tma"


def out_usable(address: int, ld: int, batch_stride: int, batch: int, size: int) -> bool:
    """Whether TMA can address the output (16-byte address and strides): the kernel's ``out_tma``
    (`TmaPersistentBatchMatmul.kernel`) computes the same from the same values."""
    return (address | ld * size | (batch_stride * size if batch > 1 else 0)) % 16 == 0


def device_address(pointer, offset: int, itemsize: int) -> int:
    """The device address of an operand's element 0 (``pointer``: a device array or an address)."""
    base = pointer if isinstance(pointer, int) else pointer.data.ptr
    return base + offset * itemsize


#: Tile coordinates of TMA copies are signed 32-bit: an extent (less a tile) must stay below this.
TMA_COORDINATE_LIMIT = (1 << 31) - 512


class TmaPersistentBatchMatmul(PartitionedBatchMatmul):
    name = "tma_persistent_batch"
    passes_weights = False   # its operand copies and tensor maps know nothing of packed weights
    # The dispatch knobs come from the algorithm's dispatch slot (its order is their default), as
    # on the partitioned level: declaring them here too would clash with any other order there.
    provides = frozenset({PERSISTENT_TILE_LOOP, TENSOR_MAPS, OUTPUT_TENSOR_MAP})
    requires = (Requirement.of("global_", OWN_TILE_LOOP,
                               why="its cubes own several tiles, and only a global level that runs the "
                                   "tile loop itself computes them all"),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        if dialect.backend != "cuda":
            raise SetupError(self.name, "TMA tensor maps exist on CUDA only")
        extents = {"M": problem.m, "N": problem.n, "K": problem.k, "batch": problem.batch}
        big = {name: value for name, value in extents.items() if value >= TMA_COORDINATE_LIMIT}
        if big:
            raise SetupError(self.name, f"{', '.join(f'{k} = {v}' for k, v in big.items())}: TMA copies take "
                                        f"32-bit signed tile coordinates (cp.async.bulk.tensor), which reach "
                                        f"{TMA_COORDINATE_LIMIT - 1} at most (a kernel of 64-bit pointers runs it)")
        dispatch = dispatch_for(selection.dispatch, selection.dispatch_width, self.name)
        global_ = replace(self.global_.setup(problem, selection, dialect), epilogue=problem.epilogue)
        return BatchConfig(global_=global_, dispatch=dispatch,
                           persistent_cubes=max(1, dialect.device.compute_units))

    @staticmethod
    def _out_map(cfg: BatchConfig) -> bool:
        """Whether the writer stores through the output's tensor map (OUTPUT_TENSOR_MAP)."""
        return cfg.global_.writer.tma_store

    def _maps(self, cfg: BatchConfig) -> tuple[str, ...]:
        """The tensor-map parameters: the operands', and the output's where the writer takes it."""
        return _MAPS + (("out_map",) if self._out_map(cfg) else ())

    def signature(self, cfg: BatchConfig) -> KernelSignature:
        return super().signature(cfg).extended(
            *(Param(name, BY_VALUE, size=MAP_BYTES, align=MAP_ALIGN) for name in self._maps(cfg)),
            *((array(KEPT_SCRATCH, "f32", writable=True),) if self.split_tail(cfg) else ()))

    @staticmethod
    def split_tail(cfg: BatchConfig) -> int:
        """The most parts the global level's config lets a tile of the last wave be split into
        (batch/split_tail.py; 0 or 1: none)."""
        return cfg.global_.tile_loop.split_tail

    def launches(self, cfg: BatchConfig, problem: MatmulProblem) -> list[Launch]:
        """The batch's launches; split tail: the GEMM kernel's cubes wait for one another (the
        tail's owners for the later parts), so it is launched co-resident (batch/split_tail.py),
        unless the last part to finish adds them (nothing waits)."""
        out = super().launches(cfg, problem)
        if not self.split_tail(cfg) or not cfg.global_.tile_loop.split_waits:
            return out
        return [replace(launch, co_resident=True) if launch.name == KERNEL_NAME else launch for launch in out]

    def kept_workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> Workspace | None:
        if not self.split_tail(cfg):
            return None
        return Workspace(FLOAT32, split_tail.workspace_words(cfg.persistent_cubes, self._tile_words(cfg)),
                         zeroed=split_tail.flag_words(cfg.persistent_cubes))

    @staticmethod
    def _tile_words(cfg: BatchConfig) -> int:
        """A partial slot: one 32-bit word per element of the tile (float32 or int32 sums; the
        global level checks its stage's count against it)."""
        return cfg.global_.stage.stage_m * cfg.global_.stage.stage_n

    @staticmethod
    def cluster_m(cfg: BatchConfig) -> int:
        """Cubes per cluster along M, as the global level's config asks (1: no clusters)."""
        return cfg.global_.tile_loop.cluster_m

    def kernel_attributes(self, cfg: BatchConfig, d: Dialect) -> str:
        c = self.cluster_m(cfg)
        return d.cluster_dims(c) if c > 1 else ""

    def cube_count(self, cfg: BatchConfig, problem: MatmulProblem) -> int:
        if self.split_tail(cfg):     # every multiprocessor: the tail's parts fill the device
            return max(1, cfg.persistent_cubes)
        c = self.cluster_m(cfg)
        if c == 1:
            return super().cube_count(cfg, problem)
        stage = cfg.global_.stage
        cluster_tiles = problem.batch * -(-problem.m // (c * stage.stage_m)) * -(-problem.n // stage.stage_n)
        return c * min(cluster_tiles, max(1, cfg.persistent_cubes // c))

    def scope(self, cfg: BatchConfig, d: Dialect | None = None) -> CubeScope:
        out = (OperandRef("out", "out_ld", "out_map", "(int)b", OUT_FLAG) if self._out_map(cfg)
               else OperandRef("out", "out_ld"))
        c = self.cluster_m(cfg)
        return CubeScope(lhs=OperandRef("lhs", "lhs_ld", "lhs_map", "(lhs_batch_stride != 0 ? (int)b : 0)"),
                         rhs=OperandRef("rhs", "rhs_ld", "rhs_map", "(rhs_batch_stride != 0 ? (int)b : 0)"),
                         out=out,
                         tiles=((lambda body, first="0", step=1, slices="", loads=False:
                                 self.tile_loop(cfg, d, body, first, step, slices))
                                if d is not None else None),
                         cluster_m=c, cluster_rank="cluster_rank" if c > 1 else "0",
                         split_tail=self.split_tail_scope(cfg) if self.split_tail(cfg) else None)

    def split_tail_scope(self, cfg: BatchConfig) -> split_tail.SplitTailScope:
        """What the global level reads of the split-tail schedule: the partial slots' size and the
        names of each unit's K range, which `split_tail.unit_loop` declares."""
        return split_tail.SplitTailScope(self._tile_words(cfg))

    def tile_origin(self, cfg: BatchConfig, d: Dialect) -> list[str]:
        """As the partitioned level's, the order computed by its function (rendered once: `kernel`)."""
        stage, s = cfg.global_.stage, self.dispatch_scope(cfg)
        return [*s.call(), *self.pointers(cfg, d),
                f"const i64 cube_m0 = {s.row} * {stage.stage_m};",
                f"const i64 cube_n0 = {s.col} * {stage.stage_n};"]

    def tile_loop(self, cfg: BatchConfig, d: Dialect, body: str, first: str = "0", step: int = 1,
                  slices: str = "") -> str:
        """The loop over this cube's tiles around ``body``; ``first`` and ``step``: of the cube's
        tiles, only the ``first``-th, then every ``step``-th (a role that shares the tiles with
        another, as ping-pong consumers do). Split tail: the loop over the cube's units of
        ``slices`` K slices a tile (batch/split_tail.py), for a role that takes them all."""
        if self.split_tail(cfg):
            if (first, step) != ("0", 1) or not slices:
                raise SetupError(self.name, "the split-tail schedule deals every unit to the cube's roles alike: "
                                            "each role walks all of them, given the K slices of a tile")
            return split_tail.unit_loop(self.split_tail_scope(cfg), slices, self.tile_origin(cfg, d), body,
                                        self.split_tail(cfg))
        c = self.cluster_m(cfg)
        start = "" if first == "0" else f" + ({first}) * {'CUBE_COUNT' if c == 1 else f'(CUBE_COUNT / {c})'}"
        stride = "" if step == 1 else f"{step} * "
        if c == 1:
            return "\n".join([f"for (i64 cube = CUBE_ID{start}; cube < batch * cubes_m * cubes_n; "
                              f"cube += {stride}CUBE_COUNT) {{", *self.tile_origin(cfg, d), body, "}"])
        stage = cfg.global_.stage
        return "\n".join([
            f"for (i64 cube = CUBE_ID / {c}{start}; cube < batch * cluster_rows * cubes_n; "
            f"cube += {stride}(CUBE_COUNT / {c})) {{",
            # The dispatch order over cluster tiles: its cubes_m is the rows of cluster tiles.
            *DispatchScope(cubes_m="cluster_rows", b="cluster_b", row="cluster_row", col="cluster_col").call(),
            "const i64 b = cluster_b;",
            f"const i64 cube_row = cluster_row * {c} + cluster_rank;",
            "const i64 cube_col = cluster_col;",
            *self.pointers(cfg, d),
            f"const i64 cube_m0 = cube_row * {stage.stage_m};",
            f"const i64 cube_n0 = cube_col * {stage.stage_n};",
            body, "}"])

    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        c = self.cluster_m(cfg)
        cluster = ([f"const i64 cluster_rows = (cubes_m + {c - 1}) / {c};",
                    f"const i64 cluster_rank = (i64){d.cluster_rank()};"] if c > 1 else [])
        size = cfg.result.itemsize
        # The host's `out_usable` on the same values: out_map holds the output's map exactly then.
        flag = ([f"const bool {OUT_FLAG} = ((((unsigned long long)(out_base + out_offset)) | (unsigned long long)(out_ld * {size})"
                 f" | (unsigned long long)(batch > 1 ? out_batch_stride * {size} : 0)) & 15) == 0;"]
                if self._out_map(cfg) else [])
        return "\n\n".join([cfg.dispatch.function(self.name),
                            "\n".join([*self.kernel_head(cfg, d), *cluster, *flag, self.body(cfg, d), "}"])])

    def call_values(self, cfg: BatchConfig, problem: MatmulProblem) -> CallValues:
        g, level = cfg.global_, self.global_
        loaders = (("lhs", level.lhs_loader, g.lhs_loader, problem.lhs.itemsize, ("M", "K")),
                   ("rhs", level.rhs_loader, g.rhs_loader, problem.rhs.itemsize, ("K", "N")))

        def derive(values: dict) -> dict:
            out = {}
            for op, loader, lcfg, itemsize, (rows, cols) in loaders:
                if f"{op}_map" not in self._maps(cfg):
                    continue            # an operand read without a map (a converting loader's packed words)
                address, ld, stride = self.map_source(cfg, values, op, itemsize)
                spec = loader.tensor_map_spec(lcfg, int(values[rows]), int(values[cols]), ld, stride, int(values["batch"]))
                out[f"{op}_map"] = ENCODER.encode(address, spec)
            if self._out_map(cfg):
                out.update(self._out_values(cfg, values, problem.out.itemsize))
            return out

        return CallValues(self._maps(cfg), derive)

    def map_source(self, cfg: BatchConfig, values: dict, op: str, itemsize: int) -> tuple[int, int, int]:
        """(address of element 0, leading dimension, batch stride) of what operand ``op``'s map
        describes: the operand itself here (a level copying it first describes the copy)."""
        return (device_address(values[f"{op}_base"], int(values[f"{op}_offset"]), itemsize), int(values[f"{op}_ld"]),
                int(values[f"{op}_batch_stride"]))

    def _out_values(self, cfg: BatchConfig, values: dict, itemsize: int) -> dict:
        """``out_map``: the output's map where TMA can address it, else zeros (the kernel's
        ``out_tma`` is then false, and it stores directly)."""
        rows, cols, ld = int(values["M"]), int(values["N"]), int(values["out_ld"])
        stride, batch = int(values["out_batch_stride"]), int(values["batch"])
        address = device_address(values["out_base"], int(values["out_offset"]), itemsize)
        if not out_usable(address, ld, stride, batch, itemsize):
            return {"out_map": bytes(MAP_BYTES)}
        spec = self.global_.writer.tensor_map_spec(cfg.global_, rows, cols, ld, stride, batch)
        return {"out_map": ENCODER.encode(address, spec)}
