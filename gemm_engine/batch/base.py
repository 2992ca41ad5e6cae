"""Batch level: the kernel entry point, dispatching global matmuls over the whole output.

Contract
--------
The batch level owns the kernel signature and the grid. Its kernel receives, for each operand, a
base pointer, an element offset, a leading dimension and a batch stride (0 for a broadcast batch),
and ``M``, ``N``, ``K``, ``batch``. It maps each cube (block / work-group) to one
``(batch index, output tile row, output tile column)`` through its dispatch order, moves the
pointers to that batch entry, sets ``cube_m0``/``cube_n0`` and runs the global matmul's body.
Host side, ``cube_count`` says how many cubes to launch. Every output tile of every batch entry is
given to exactly one cube.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..global_.base import GlobalConfig, GlobalMatmul
from ..problem import MatmulProblem

KERNEL_NAME = "gemm_engine_kernel"


@dataclass(frozen=True)
class BatchConfig:
    global_: GlobalConfig
    dispatch: str

    @property
    def units(self) -> int:
        return self.global_.units


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
        """The whole kernel function (without the dialect preamble)."""
