"""Persistent TMA batch level: about one cube per multiprocessor, each looping over output tiles in
the dispatch order, with each operand's TMA tensor map as a kernel parameter.

It provides what the warp-specialized Hopper global level needs (global_/tma_specialized.py):

* `PERSISTENT_TILE_LOOP`: the scope's ``tiles(body)`` renders the loop over this cube's tiles
  (``CUBE_ID``, ``CUBE_ID + CUBE_COUNT``, ...; each mapped by the dispatch order to a batch entry and
  tile origin, with the output and epilogue pointers of that entry) around ``body``. The global level
  renders it once per warp role, so producer and consumers walk the same tiles in the same order
  with no barrier between them: the global level must run the loop itself (`OWN_TILE_LOOP`).
* `TENSOR_MAPS`: ``lhs_map`` / ``rhs_map`` (128-byte ``__grid_constant__`` parameters, batch/signature.py
  ``by_value``) appended to the partitioned signature, encoded per call from the operand's address,
  extents, leading dimension and batch stride by its `TmaLoader` (`call_values`). The scope tells
  the loaders each map and the batch coordinate (0 for a broadcast operand, batch stride 0).

The grid is ``min(tiles, multiprocessors)``: one cube per multiprocessor (the global level's
occupancy is 1), so no cube waits for a slot while another holds a multiprocessor idle.
"""
from __future__ import annotations

from dataclasses import replace

from ..codegen.dialect import Dialect
from ..codegen.tensor_map import ENCODER, MAP_ALIGN, MAP_BYTES
from ..global_.capabilities import OWN_TILE_LOOP, PERSISTENT_TILE_LOOP, TENSOR_MAPS
from ..contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import BatchConfig, CallValues, CubeScope, OperandRef, dispatch_for, dispatch_knobs
from .partitioned import PartitionedBatchMatmul
from .signature import BY_VALUE, KernelSignature, Param

_MAPS = ("lhs_map", "rhs_map")


def _address(pointer, offset: int, itemsize: int) -> int:
    """The device address of an operand's element 0 (``pointer``: a device array or an address)."""
    base = pointer if isinstance(pointer, int) else pointer.data.ptr
    return base + offset * itemsize


class TmaPersistentBatchMatmul(PartitionedBatchMatmul):
    name = "tma_persistent_batch"
    knobs = dispatch_knobs("row_major")
    provides = frozenset({PERSISTENT_TILE_LOOP, TENSOR_MAPS})
    requires = (Requirement.of("global_", OWN_TILE_LOOP,
                               why="its cubes own several tiles, and only a global level that runs the "
                                   "tile loop itself computes them all"),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        if dialect.backend != "cuda":
            raise SetupError(self.name, "TMA tensor maps exist on CUDA only")
        dispatch = dispatch_for(selection.dispatch, selection.dispatch_width, self.name)
        global_ = replace(self.global_.setup(problem, selection, dialect), epilogue=problem.epilogue)
        return BatchConfig(global_=global_, dispatch=dispatch,
                           persistent_cubes=max(1, dialect.device.compute_units))

    def signature(self, cfg: BatchConfig) -> KernelSignature:
        return super().signature(cfg).extended(
            *(Param(name, BY_VALUE, size=MAP_BYTES, align=MAP_ALIGN) for name in _MAPS))

    def scope(self, cfg: BatchConfig, d: Dialect | None = None) -> CubeScope:
        return CubeScope(lhs=OperandRef("lhs", "lhs_ld", "lhs_map", "(lhs_batch_stride != 0 ? (int)b : 0)"),
                         rhs=OperandRef("rhs", "rhs_ld", "rhs_map", "(rhs_batch_stride != 0 ? (int)b : 0)"),
                         out=OperandRef("out", "out_ld"),
                         tiles=(lambda body: self.tile_loop(cfg, d, body)) if d is not None else None)

    def tile_loop(self, cfg: BatchConfig, d: Dialect, body: str) -> str:
        return "\n".join(["for (i64 cube = CUBE_ID; cube < batch * cubes_m * cubes_n; cube += CUBE_COUNT) {",
                          *self.tile_origin(cfg, d), body, "}"])

    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        return "\n".join([*self.kernel_head(cfg, d), self.body(cfg, d), "}"])

    def call_values(self, cfg: BatchConfig, problem: MatmulProblem) -> CallValues:
        g, level = cfg.global_, self.global_
        loaders = (("lhs", level.lhs_loader, g.lhs_loader, problem.lhs.itemsize, ("M", "K")),
                   ("rhs", level.rhs_loader, g.rhs_loader, problem.rhs.itemsize, ("K", "N")))

        def derive(values: dict) -> dict:
            out = {}
            for op, loader, lcfg, itemsize, (rows, cols) in loaders:
                spec = loader.tensor_map_spec(lcfg, int(values[rows]), int(values[cols]), int(values[f"{op}_ld"]),
                                              int(values[f"{op}_batch_stride"]), int(values["batch"]))
                address = _address(values[f"{op}_base"], int(values[f"{op}_offset"]), itemsize)
                out[f"{op}_map"] = ENCODER.encode(address, spec)
            return out

        return CallValues(_MAPS, derive)
