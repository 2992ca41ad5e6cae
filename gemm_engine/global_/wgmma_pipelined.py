"""Pipelined global matmul for warpgroup (wgmma) stages: a ring of swizzled ``cp.async`` stages.

CUDA sm_90a, and NVIDIA's OpenCL where its PTX is built for sm_90a (runtime/sass.py). `SwizzledChunkLoader`s fill a ring of S slots per operand in the 128-byte-swizzled
layout wgmma's descriptors describe; the warpgroup stage issues each slot's wgmma batch
asynchronously. With ``pending`` (0 or 1) wgmma batches left running at the end of a step, slices
are prefetched P = S - 1 - pending steps ahead:

    prologue: slices 0 .. P-1 -> slots 0 .. P-1, one cp.async group each
    step i:   cp.async.wait_group P-1        (slice i has landed, for this unit)
              fence.proxy.async.shared::cta  (make this unit's writes visible to wgmma's async proxy)
              barrier                        (every unit's slice i is there; every warpgroup has
                                              finished batches <= i-1-pending, so slot (i+P) % S,
                                              last read by batch i+P-S = i-1-pending, is free)
              issue slice i+P into slot (i+P) % S; commit a (possibly empty) group
              fence, wgmma batch on slot i % S, commit
              register-path loaders store their staged slice i+P now (after the wgmma issue, which
              their global loads' latency hides behind)
              wgmma.wait_group pending
    after:    wait for every batch, pin the accumulators, write

The writer slot decides how the accumulators leave (`global_.writers`: the staged writer reuses the
ring for the output tile once the loop is done).

The ring must start on 1024 bytes (the swizzle atoms: the hardware swizzles on absolute address
bits). CUDA's dynamic shared memory is aligned up at run time, so the launch asks for 1 KiB more
than the ring; an OpenCL local-memory array is declared so aligned (48 KiB is all it may take).
Descriptors are built once from the ring's address; a slot or tile is an add to the address field.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..compose.contracts import Requirement
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import ASYNC_DESCRIPTOR_STAGE
from ..tile.wgmma import ATOM_BYTES, check_wgmma_device
from .base import SWIZZLED_CHUNK_LOADER
from .pipelined import PipelinedGlobalConfig, PipelinedGlobalMatmul, check_ring_fits, edge_checks
from .simple import operand_tiles
from .promotion import Promotion, check_promotion
from .read.swizzled_loader import SwizzledOperandTile



@dataclass(frozen=True)
class WgmmaPipelinedConfig(PipelinedGlobalConfig):
    pending: int = 1
    promotion: Promotion | None = None     # global_/promotion.py
    #: Bytes the launch adds for aligning the ring at run time (none where the dialect declares it
    #: aligned: `Dialect.aligns_rings`, OpenCL's static array).
    align_slack: int = ATOM_BYTES

    @property
    def prefetch(self) -> int:
        return self.stages - 1 - self.pending

    @property
    def dynamic_shared_bytes(self) -> int:
        return self.stages * self.shared_memory_bytes + self.align_slack


class WgmmaPipelinedGlobalMatmul(PipelinedGlobalMatmul):
    name = "wgmma_pipelined_global"
    knobs = (Knob("stages", 4, "slots of the shared-memory ring"),
             Knob("wgmma_pending", 1, "wgmma batches left running at the end of a step (0 or 1)"))
    requires = (Requirement.of("stage", ASYNC_DESCRIPTOR_STAGE),
                Requirement.of("lhs_loader", SWIZZLED_CHUNK_LOADER, why="wgmma reads swizzled ring slots"),
                Requirement.of("rhs_loader", SWIZZLED_CHUNK_LOADER, why="wgmma reads swizzled ring slots"))
    operand_tile = SwizzledOperandTile
    applies_block_scales = True

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> WgmmaPipelinedConfig:
        check_wgmma_device(self.name, dialect)
        stages, pending = selection.stages, selection.wgmma_pending
        if pending not in (0, 1):
            raise SetupError(self.name, f"wgmma_pending={pending}; expected 0 or 1")
        if stages - 1 - pending < 1:
            raise SetupError(self.name, f"stages={stages} with wgmma_pending={pending} prefetches nothing")
        stage = self.setup_stage(problem, selection, dialect)
        check_m, check_n, check_k = edge_checks(problem, stage)
        lhs, rhs = operand_tiles(problem, stage, self.operand_tile,
                                 lhs={"swizzle": stage.lhs_layout}, rhs={"swizzle": stage.rhs_layout})
        cfg = WgmmaPipelinedConfig(stage=stage, lhs_loader=self.lhs_loader.setup(lhs, stage.units, selection),
                                   rhs_loader=self.rhs_loader.setup(rhs, stage.units, selection), out=problem.out,
                                   check_m=check_m, check_n=check_n, check_k=check_k, stages=stages,
                                   pending=pending, writer=self.writer.setup(problem, selection, dialect),
                                   promotion=check_promotion(self.name, problem, stage),
                                   align_slack=0 if dialect.aligns_rings else ATOM_BYTES)
        check_ring_fits(self.name, cfg, dialect)
        return cfg

    def shared_declarations(self, cfg: WgmmaPipelinedConfig, d: Dialect) -> str:
        st = cfg.stage
        lhs_ring = cfg.stages * cfg.lhs_loader.smem_bytes
        return "\n".join([
            d.ring_declaration("gemm_ring", cfg.dynamic_shared_bytes, ATOM_BYTES),
            f"const unsigned ring_base = ({d.shared_address('gemm_ring')} + {ATOM_BYTES - 1}u) & ~{ATOM_BYTES - 1}u;",
            "const unsigned lhs_ring = ring_base;",
            f"const unsigned rhs_ring = ring_base + {lhs_ring}u;",
            f"const u64 lhs_desc0 = {st.lhs_layout.descriptor('lhs_ring')};",
            f"const u64 rhs_desc0 = {st.rhs_layout.descriptor('rhs_ring')};",
        ])

    def _issue(self, cfg: WgmmaPipelinedConfig, d: Dialect, scope, slot: str, k0: str) -> str:
        lhs, rhs = self.lhs_loader, self.rhs_loader
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        return "\n".join([lhs.issue(cfg.lhs_loader, d, scope.lhs, f"(lhs_ring + ({slot}) * {lb}u)", scope.m0, k0,
                                    scope.m, scope.k),
                          rhs.issue(cfg.rhs_loader, d, scope.rhs, f"(rhs_ring + ({slot}) * {rb}u)", k0, scope.n0,
                                    scope.k, scope.n),
                          lhs.advance(cfg.lhs_loader, scope.lhs, cfg.stage.stage_k),
                          rhs.advance(cfg.rhs_loader, scope.rhs, cfg.stage.stage_k)])

    def _commit(self, cfg: WgmmaPipelinedConfig, d: Dialect, slot: str) -> str:
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        parts = [self.lhs_loader.commit(cfg.lhs_loader, d, f"(lhs_ring + ({slot}) * {lb}u)"),
                 self.rhs_loader.commit(cfg.rhs_loader, d, f"(rhs_ring + ({slot}) * {rb}u)")]
        return "\n".join(p for p in parts if p)

    def body(self, cfg: WgmmaPipelinedConfig, d: Dialect, scope) -> str:
        st = cfg.stage
        lb, rb = cfg.lhs_loader.smem_bytes >> 4, cfg.rhs_loader.smem_bytes >> 4
        hooks = dict(after_compute=(self.stage.wait(st, d, cfg.pending),), after_loop=(self.stage.finish(st, d),))
        if cfg.promotion is not None:   # each step waits for its batch and adds it into float32 sums
            hooks = dict(before_loop=(self.stage.declare_promoted(st, d), self.stage.init_promoted(st, d)),
                         after_compute=tuple(cfg.promotion.step(self.stage, st, d, scope)),
                         after_loop=(self.stage.finish(st, d), self.stage.take_promoted(st, d)), fresh=True)
        return self._ring_body(
            cfg, d, scope, prefetch=cfg.prefetch,
            loader_declarations=[self.lhs_loader.declare(cfg.lhs_loader, d, scope.lhs, scope.m0, "0"),
                                 self.rhs_loader.declare(cfg.rhs_loader, d, scope.rhs, "0", scope.n0)],
            lhs_cur=f"(lhs_desc0 + (u64)(cur_slot * {lb}))",
            rhs_cur=f"(rhs_desc0 + (u64)(cur_slot * {rb}))",
            before_barrier=(d.fence_proxy_async(),), **hooks)
