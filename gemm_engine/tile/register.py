"""Register (unit) tile: one thread multiplies a ``tile_m x 1`` by a ``1 x tile_n`` fragment.

The accumulator is a ``tile_m * tile_n`` register array and every index into it is a compile-time
constant (the loops are unrolled), so it stays in registers instead of spilling to local memory.
It runs on every dialect and dtype, and is what the unit algorithms and odd shapes use. It
multiplies and accumulates in the compute type (``cfg.compute``): float32 for half precision,
32-bit integers for int8 (exact: the loaders widen each int8 element once, on its way to shared
memory; a sum of K products of int8 fits int32, so stays exact, for any values while K < 2^17).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import UNIT_SCOPE
from .base import SmemTile, TileConfig, TileMatmul

# Beyond 8 x 8 accumulators per thread (64 registers, plus fragments) register pressure spills.
_MAX_TILE = 8


@dataclass(frozen=True)
class RegisterTileConfig(TileConfig):
    pass


class RegisterTile(TileMatmul):
    name = "register"
    scope = "unit"
    knobs = (Knob("tile_m", 4, "rows of a unit's register tile"),
             Knob("tile_n", 4, "columns of a unit's register tile"))
    provides = frozenset({UNIT_SCOPE})

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> RegisterTileConfig:
        tm, tn = selection.tile_m, selection.tile_n
        for label, value in (("tile_m", tm), ("tile_n", tn)):
            if value < 1 or value > _MAX_TILE:
                raise SetupError(self.name, f"{label}={value} must be between 1 and {_MAX_TILE}")
        if problem.lhs.compute != problem.rhs.compute:
            raise SetupError(self.name, "lhs and rhs must share a compute type")
        if problem.lhs.compute == "f64" and not dialect.supports("fp64"):
            raise SetupError(self.name, f"float64 is not supported by device {dialect.device.name!r}")
        return RegisterTileConfig(tile_m=tm, tile_n=tn, tile_k=1, compute=problem.lhs.compute)

    def _ctype(self, cfg, d):
        return d.c_type(cfg.compute)

    def declare_lhs(self, cfg, d, frag):
        return f"{self._ctype(cfg, d)} {frag}[{cfg.tile_m}];"

    def declare_rhs(self, cfg, d, frag):
        return f"{self._ctype(cfg, d)} {frag}[{cfg.tile_n}];"

    def declare_acc(self, cfg, d, acc):
        return f"{self._ctype(cfg, d)} {acc}[{cfg.tile_m * cfg.tile_n}];"

    def init_acc(self, cfg, d, acc):
        return (f"#pragma unroll\nfor (int i = 0; i < {cfg.tile_m * cfg.tile_n}; ++i) "
                f"{acc}[i] = {d.zero(cfg.compute)};")

    @staticmethod
    def _load(frag: str, count: int, src: SmemTile) -> str:
        return (f"#pragma unroll\nfor (int i = 0; i < {count}; ++i) "
                f"{frag}[i] = {src.array}[({src.k}) * {src.ld} + ({src.origin}) + i];")

    def load_lhs(self, cfg, d, frag, src):
        return self._load(frag, cfg.tile_m, src)

    def load_rhs(self, cfg, d, frag, src):
        return self._load(frag, cfg.tile_n, src)

    def execute(self, cfg, d, lhs, rhs, acc):
        # An outer product: tile_m * tile_n independent FMAs per k step.
        return (f"#pragma unroll\nfor (int i = 0; i < {cfg.tile_m}; ++i)\n"
                f"#pragma unroll\n    for (int j = 0; j < {cfg.tile_n}; ++j)\n"
                f"        {acc}[i * {cfg.tile_n} + j] += {lhs}[i] * {rhs}[j];")

    def acc_elements(self, cfg, acc):
        for i in range(cfg.tile_m):
            for j in range(cfg.tile_n):
                yield str(i), str(j), f"{acc}[{i * cfg.tile_n + j}]"
