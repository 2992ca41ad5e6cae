"""The warp-specialized Hopper kernel (tma_specialized.py) with a converting rhs loader
(read/converting_loader.py): quantized weights read as their packed words and converted in shared
memory by the producer warpgroup, the consumers' wgmma loop the dense kernel's.

Roles of the producer warpgroup (the consumers are the base level's, unchanged):

* its first unit issues, per slot, after the slot is *empty*: the lhs TMA copies on the slot's
  *full* barrier (its expected bytes are the lhs's only) and the packed words' bulk copies on the
  slot's *packed* barrier;
* its last three warps (the converting units) wait for the slot's *packed* barrier, convert the
  words into the slot's 16-bit part, make their writes visible to the async proxy (wgmma reads
  shared memory through it: ``fence.proxy.async``), and each warp arrives once on the *full*
  barrier, which so completes when the lhs bytes are in and all three warps have arrived.

A slot's packed words are overwritten only after its *empty* phase, which follows the consumers'
reads, which follow the conversion: so the converters never read words of the next phase.

Registers: the converters need more than a copy-issuing warpgroup's 40, so the producer keeps
`PRODUCER_REGISTERS` and the consumers take what is left within what the launch gave (two consumer
warpgroups: 208 each).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..codegen.dialect import Dialect
from ..compose.capabilities import (ASYNC_DESCRIPTOR_STAGE, CONVERTING_LOADER, PERSISTENT_TILE_LOOP, RAGGED_REDUCTION,
                                    TMA_LOADER)
from ..compose.contracts import Requirement
from ..problem import Layout, MatmulProblem
from ..tile.wgmma import WARPGROUP
from .pipelined import check_ring_fits
from .tma_specialized import TmaSpecializedGlobalMatmul
from .tma_specialized_config import TmaSpecializedConfig

#: Registers per unit: the producer warpgroup's (the converters': at 64-80 they spilled), then the
#: consumers', all within what the launch gave the cube (2 consumer warpgroups: 128 x 88 + 256 x 208 =
#: 384 x 168; 3: 512 x 128): `setmaxnreg.inc` waits for registers no warpgroup gave back, so a split
#: above it (a producer at 96 beside two consumers at 208) hung on the H100 when another cube held
#: the rest of the file.
PRODUCER_REGISTERS = 88
CONSUMER_REGISTERS = {1: 232, 2: 208, 3: 136}
_PLANE = 32


@dataclass(frozen=True)
class TmaConvertingConfig(TmaSpecializedConfig):
    consumer_registers = property(lambda self: CONSUMER_REGISTERS[self.consumers])


class TmaConvertingGlobalMatmul(TmaSpecializedGlobalMatmul):
    name = "tma_converting_global"
    # Its converting roles count a tile's slices once for the kernel: no reduction per tile.
    provides = TmaSpecializedGlobalMatmul.provides - {RAGGED_REDUCTION}
    requires = (Requirement.of("stage", ASYNC_DESCRIPTOR_STAGE),
                Requirement.of("lhs_loader", TMA_LOADER, why="its producer unit issues whole-slot TMA copies"),
                Requirement.of("rhs_loader", CONVERTING_LOADER,
                               why="the producer's other warps convert each rhs slot from its packed words"),
                Requirement.of("batch", PERSISTENT_TILE_LOOP,
                               why="each warp role loops over the cube's tiles itself"))

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> TmaConvertingConfig:
        # The values are written K-major, as a column-major rhs's TMA copies would be: the stage's
        # transpose bits follow that.
        base = super().setup(replace(problem, rhs_layout=Layout.COL), selection, dialect)
        kept = {f.name: getattr(base, f.name) for f in fields(base)}
        kept.update(converters=base.rhs_loader.units // _PLANE, weights=problem.weights)
        cfg = TmaConvertingConfig(**kept)
        check_ring_fits(self.name, cfg, dialect)        # with the packed barriers
        return cfg

    def shared_declarations(self, cfg: TmaConvertingConfig, d: Dialect) -> str:
        # The converters read the packed words through a generic pointer into the ring.
        return "\n".join([super().shared_declarations(cfg, d),
                          f"const unsigned char* const cv_ring = gemm_ring + (rhs_ring - {d.shared_address('gemm_ring')});"])

    def _rhs_issue(self, cfg: TmaConvertingConfig, d: Dialect, scope) -> str:
        return self.rhs_loader.issue(cfg.rhs_loader, d, scope, f"rhs_ring + slot * {cfg.rhs_loader.smem_bytes}u",
                                     self._packed_full(cfg, "slot"), "k0")

    def _producer_roles(self, cfg: TmaConvertingConfig, d: Dialect, scope, issue: str) -> str:
        s, sk, rl, rc = cfg.stages, cfg.stage.stage_k, self.rhs_loader, cfg.rhs_loader
        lo, hi = self._k_bounds(scope)
        rb = rc.smem_bytes
        convert = "\n".join([
            f"for (int step = {lo}; step < {hi}; ++step, ++it) {{",
            f"const unsigned slot = it % {s}u;",
            d.mbarrier_wait(self._packed_full(cfg, "slot"), f"(it / {s}u) & 1u"),
            *rl.convert(rc, d, scope, f"rhs_ring + slot * {rb}u", f"(cv_ring + slot * {rb}u + {rc.values_bytes}u)",
                        f"step * {sk}"),
            d.fence_proxy_async(),
            "SYNC_PLANE();",
            f"if (UNIT_ID % {_PLANE} == 0) {d.mbarrier_arrive(self._full('slot'))}",
            "}",
        ])
        first = cfg.consumer_units + WARPGROUP - rc.units
        return "\n".join([
            d.setmaxnreg(False, PRODUCER_REGISTERS),
            f"if (UNIT_ID == {cfg.consumer_units}) {{",
            "unsigned it = 0;",
            scope.tiles(issue, slices="k_steps"),
            f"}} else if (UNIT_ID >= {first}) {{",
            *rl.declare(rc, d, f"(int)UNIT_ID - {first}"),
            "unsigned it = 0;",
            scope.tiles(convert, slices="k_steps"),
            "}",
        ])
