"""Global level: one cube computes one ``stage_m x stage_n`` output tile over the whole K.

Contract
--------
On entry (inside the kernel body the batch level rendered) these names are in scope:
``lhs``/``rhs`` (global pointers already moved to this batch entry), ``out`` likewise,
``lhs_ld``/``rhs_ld``/``out_ld`` (leading dimensions in elements), ``M``/``N``/``K``, and
``cube_m0``/``cube_n0`` (first output row and column of this cube). Shared memory is declared by
``shared_declarations`` at kernel scope (OpenCL requires it there).

The global matmul loops over K in steps of ``stage_k``: its loaders move the lhs and rhs slices of
global memory into the shared stages (zero-filling anything outside the problem, so the stage never
needs bounds checks), synchronizes the cube, runs the stage matmul (possibly injecting its next
loads through the stage event listener) and finally writes the accumulators with bounds checks only
on the axes the problem does not divide. On exit every in-range output element of the cube's tile
has been written exactly once and nothing outside it has.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..problem import MatmulProblem
from ..stage.base import StageConfig, StageMatmul
from .epilogue import IDENTITY, Epilogue
from .loaders import Loader, LoaderConfig


@dataclass(frozen=True)
class GlobalConfig:
    stage: StageConfig
    lhs_loader: LoaderConfig
    rhs_loader: LoaderConfig
    out: ElementType
    check_m: bool
    check_n: bool
    check_k: bool
    # What happens to each accumulator on its way out (set from the problem by the batch level).
    epilogue: Epilogue = field(default=IDENTITY, kw_only=True)

    @property
    def shared_memory_bytes(self) -> int:
        return self.lhs_loader.smem_bytes + self.rhs_loader.smem_bytes

    @property
    def units(self) -> int:
        """Units per cube the kernel is launched with: the stage's, unless a global matmul adds
        units of its own (e.g. load-only units)."""
        return self.stage.units


class GlobalMatmul(ABC):
    """A global matmul family, generic over its stage matmul and its two loaders."""

    name = "global"
    #: Whether ``body`` may run again in the same cube for another output tile (a persistent batch
    #: launch puts each run in its own block and a cube barrier between runs): nothing a run leaves
    #: behind (copies in flight, barrier phases, shared state read before it is written) may change
    #: the next. Opt-in: an unchecked global matmul gets one cube per tile.
    reentrant = False
    #: Cubes per compute unit the compiler should plan registers for (0: its own default). A
    #: bandwidth-bound body with many loads in flight says 1: ptxas then keeps them all in
    #: registers instead of serializing them to raise occupancy.
    occupancy = 0

    def __init__(self, stage: StageMatmul, lhs_loader: Loader, rhs_loader: Loader):
        self.stage = stage
        self.lhs_loader = lhs_loader
        self.rhs_loader = rhs_loader

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> GlobalConfig: ...

    @abstractmethod
    def shared_declarations(self, cfg: GlobalConfig, d: Dialect) -> str: ...

    @abstractmethod
    def body(self, cfg: GlobalConfig, d: Dialect) -> str: ...

    # -- shared by every global matmul ----------------------------------------------------------
    def store(self, cfg: GlobalConfig, d: Dialect, row: str, col: str, value: str) -> str:
        """Statement: store the accumulator ``value`` of tile element (``row``, ``col``) (relative
        to ``cube_m0``/``cube_n0``), bounds-checked only on the axes the problem does not divide.
        Every writer goes through here, so one change (e.g. an epilogue) reaches every kernel."""
        return self.guarded(cfg, row, col, d.store_global(
            cfg.out, "out", f"(cube_m0 + {row}) * out_ld + cube_n0 + {col}",
            self.output_value(cfg, d, row, col, value)))

    @staticmethod
    def output_value(cfg: GlobalConfig, d: Dialect, row: str, col: str, value: str) -> str:
        """Expression: what is stored for accumulator ``value`` of tile element (row, col): the
        accumulator through the problem's fused epilogue."""
        return cfg.epilogue.apply(d, value, f"cube_m0 + {row}", f"cube_n0 + {col}")

    @staticmethod
    def bounds(cfg: GlobalConfig, row: str, col: str) -> list[str]:
        """Conditions that tile element (row, col) lies inside the problem (none where it divides)."""
        return (([f"cube_m0 + {row} < M"] if cfg.check_m else [])
                + ([f"cube_n0 + {col} < N"] if cfg.check_n else []))

    def guarded(self, cfg: GlobalConfig, row: str, col: str, statement: str) -> str:
        conds = self.bounds(cfg, row, col)
        return f"if ({' && '.join(conds)}) {statement}" if conds else statement

    def write_output(self, cfg: GlobalConfig, d: Dialect) -> str:
        """Store the stage's accumulators, bounds-checked only where the problem needs it."""
        return self.stage.write(cfg.stage, d, lambda row, col, value: self.store(cfg, d, row, col, value))
