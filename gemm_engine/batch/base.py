"""Batch level: the kernel entry point, dispatching global matmuls over the whole output.

Contract
--------
The batch level owns the kernel signature and the grid. Its kernel receives, for each operand, a
base pointer, an element offset, a leading dimension and a batch stride (0 for a broadcast batch),
and ``M``, ``N``, ``K``, ``batch`` (then the epilogue's arguments). It maps each cube (block / work-group) to one
``(batch index, output tile row, output tile column)`` through its dispatch order, moves the
pointers to that batch entry, sets ``cube_m0``/``cube_n0`` and runs the global matmul's body.
Host side, ``cube_count`` says how many cubes to launch. Every output tile of every batch entry is
given to exactly one cube: one cube per tile, or (persistent) about one cube per compute unit,
each looping over the tiles ``CUBE_ID``, ``CUBE_ID + CUBE_COUNT``, ... of the dispatch order, which
needs a global matmul whose body may run several times in one cube (``GlobalMatmul.reentrant``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..dtypes import ElementType
from ..global_.base import GlobalConfig, GlobalMatmul
from ..global_.epilogue import Epilogue
from ..problem import MatmulProblem
from .dispatch import Dispatch

KERNEL_NAME = "gemm_engine_kernel"


@dataclass(frozen=True)
class BatchConfig:
    global_: GlobalConfig
    dispatch: Dispatch
    #: Persistent launch: at most this many cubes, each looping over tiles; 0: one cube per tile.
    #: Host-side only (the kernel reads its cube count), but it depends on the device.
    persistent_cubes: int = 0

    @property
    def units(self) -> int:
        return self.global_.units

    @property
    def result(self) -> ElementType:
        """The element type the kernels finally store (a split-K batch's global stores partials)."""
        return self.global_.out

    @property
    def epilogue(self) -> Epilogue:
        """The epilogue applied where ``result`` is stored."""
        return self.global_.epilogue


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a batch matmul: every kernel of a batch matmul takes the same arguments
    (the operands, ``M, N, K, batch``, the epilogue's, then the workspace when there is one)."""

    name: str
    cubes: int
    units: int
    dynamic_shared: bool = True   # launched with the global matmul's dynamic shared memory


class BatchMatmul(ABC):
    name = "batch"

    def __init__(self, global_: GlobalMatmul):
        self.global_ = global_

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig: ...

    @abstractmethod
    def cube_count(self, cfg: BatchConfig, problem: MatmulProblem) -> int: ...

    @abstractmethod
    def kernel(self, cfg: BatchConfig, d: Dialect) -> str:
        """Every kernel function (without the dialect preamble)."""

    def launch_bounds(self, cfg: BatchConfig) -> str:
        """The main kernel's launch bounds: its units, and the global matmul's occupancy hint."""
        hint = self.global_.occupancy
        return f"LAUNCH_BOUNDS_MIN({cfg.units}, {hint})" if hint else f"LAUNCH_BOUNDS({cfg.units})"

    def launches(self, cfg: BatchConfig, problem: MatmulProblem) -> list[Launch]:
        """The kernels to run, in order (one, by default)."""
        return [Launch(KERNEL_NAME, self.cube_count(cfg, problem), cfg.units)]

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> tuple[ElementType, int] | None:
        """(element type, count) of the scratch buffer the kernels share, or None."""
        return None
