"""Pipelined global matmul for warpgroup (wgmma) stages: a ring of swizzled ``cp.async`` stages.

CUDA sm_90a only. `SwizzledChunkLoader`s fill a ring of S slots per operand in the 128-byte-swizzled
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

The ring is dynamic shared memory, aligned up to 1024 bytes at run time (the swizzle atoms must be:
the hardware swizzles on absolute address bits), so the launch asks for 1 KiB more than the ring.
Descriptors are built once from the ring's address; a slot or tile is an add to the address field.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..stage.events import StageEventListener
from ..tile.wgmma import ATOM_BYTES, check_wgmma_device
from .pipelined import CP_ASYNC_COMMIT, PipelinedGlobalConfig, PipelinedGlobalMatmul, cp_async_wait
from .swizzled_loader import SwizzledChunkLoader, SwizzledOperandTile

FENCE_PROXY_ASYNC = 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");'


@dataclass(frozen=True)
class WgmmaPipelinedConfig(PipelinedGlobalConfig):
    pending: int = 1

    @property
    def prefetch(self) -> int:
        return self.stages - 1 - self.pending

    @property
    def dynamic_shared_bytes(self) -> int:
        return self.stages * self.shared_memory_bytes + ATOM_BYTES   # + alignment slack


class WgmmaPipelinedGlobalMatmul(PipelinedGlobalMatmul):
    name = "wgmma_pipelined_global"

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> WgmmaPipelinedConfig:
        check_wgmma_device(self.name, dialect)
        if not isinstance(self.lhs_loader, SwizzledChunkLoader) or not isinstance(self.rhs_loader, SwizzledChunkLoader):
            raise SetupError(self.name, "needs swizzled chunk loaders")
        stages, pending = getattr(selection, "stages", 4), getattr(selection, "wgmma_pending", 1)
        if pending not in (0, 1):
            raise SetupError(self.name, f"wgmma_pending={pending}; expected 0 or 1")
        if stages - 1 - pending < 1:
            raise SetupError(self.name, f"stages={stages} with wgmma_pending={pending} prefetches nothing")
        stage = self.stage.setup(problem, selection, dialect)
        check_m, check_n, check_k = (problem.m % stage.stage_m != 0, problem.n % stage.stage_n != 0,
                                     problem.k % stage.stage_k != 0)
        smem = stage.tile.smem_word
        lhs = SwizzledOperandTile("lhs", problem.lhs, Layout(problem.lhs_layout), stage.stage_m, stage.stage_k,
                                  check_m, check_k, 64, k_along_rows=False, smem_word=smem,
                                  swizzle=stage.lhs_layout, align=problem.lhs_align)
        rhs = SwizzledOperandTile("rhs", problem.rhs, Layout(problem.rhs_layout), stage.stage_k, stage.stage_n,
                                  check_k, check_n, 64, k_along_rows=True, smem_word=smem,
                                  swizzle=stage.rhs_layout, align=problem.rhs_align)
        cfg = WgmmaPipelinedConfig(stage=stage, lhs_loader=self.lhs_loader.setup(lhs, stage.units),
                                   rhs_loader=self.rhs_loader.setup(rhs, stage.units), out=problem.out,
                                   check_m=check_m, check_n=check_n, check_k=check_k, stages=stages,
                                   pending=pending)
        if cfg.dynamic_shared_bytes > dialect.device.max_shared_memory:
            raise SetupError(self.name, f"{stages} stages need {cfg.dynamic_shared_bytes} bytes of shared "
                                        f"memory, the device allows {dialect.device.max_shared_memory}")
        return cfg

    def shared_declarations(self, cfg: WgmmaPipelinedConfig, d: Dialect) -> str:
        st = cfg.stage
        lhs_ring = cfg.stages * cfg.lhs_loader.smem_bytes
        lhs_bits, rhs_bits = st.lhs_layout.descriptor_bits(), st.rhs_layout.descriptor_bits()
        return "\n".join([
            d.dynamic_shared("gemm_ring"),
            f"const unsigned ring_base = ({d.shared_address('gemm_ring')} + {ATOM_BYTES - 1}u) & ~{ATOM_BYTES - 1}u;",
            "const unsigned lhs_ring = ring_base;",
            f"const unsigned rhs_ring = ring_base + {lhs_ring}u;",
            f"const unsigned long long lhs_desc0 = {lhs_bits}ull | (unsigned long long)(lhs_ring >> 4);",
            f"const unsigned long long rhs_desc0 = {rhs_bits}ull | (unsigned long long)(rhs_ring >> 4);",
        ])

    def _issue_slot(self, cfg: WgmmaPipelinedConfig, d: Dialect, slot: str, k0: str) -> str:
        lhs, rhs = self.lhs_loader, self.rhs_loader
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        return "\n".join([lhs.issue(cfg.lhs_loader, d, f"(lhs_ring + ({slot}) * {lb}u)", "cube_m0", k0, "M", "K"),
                          rhs.issue(cfg.rhs_loader, d, f"(rhs_ring + ({slot}) * {rb}u)", k0, "cube_n0", "K", "N"),
                          lhs.advance(cfg.lhs_loader, cfg.stage.stage_k),
                          rhs.advance(cfg.rhs_loader, cfg.stage.stage_k)])

    def _commit_slot(self, cfg: WgmmaPipelinedConfig, d: Dialect, slot: str) -> str:
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        parts = [self.lhs_loader.commit(cfg.lhs_loader, d, f"(lhs_ring + ({slot}) * {lb}u)"),
                 self.rhs_loader.commit(cfg.rhs_loader, d, f"(rhs_ring + ({slot}) * {rb}u)")]
        return "\n".join(p for p in parts if p)

    def body(self, cfg: WgmmaPipelinedConfig, d: Dialect) -> str:
        s, p, sk, st = cfg.stages, cfg.prefetch, cfg.stage.stage_k, cfg.stage
        lb, rb = cfg.lhs_loader.smem_bytes >> 4, cfg.rhs_loader.smem_bytes >> 4
        commit_now, commit_later = self._commit_slot(cfg, d, "pre"), self._commit_slot(cfg, d, "load_slot")
        lhs_desc = f"(lhs_desc0 + (unsigned long long)(cur_slot * {lb}))"
        rhs_desc = f"(rhs_desc0 + (unsigned long long)(cur_slot * {rb}))"
        return "\n".join([
            self.stage.declare(st, d),
            self.stage.init_accumulators(st, d),
            self.lhs_loader.declare(cfg.lhs_loader, d, "cube_m0", "0"),
            self.rhs_loader.declare(cfg.rhs_loader, d, "0", "cube_n0"),
            f"const int k_steps = (int)((K + {sk - 1}) / {sk});",
            f"#pragma unroll\nfor (int pre = 0; pre < {p}; ++pre) {{",
            "if (pre < k_steps) {",
            f"const i64 k0 = (i64)pre * {sk};",
            self._issue_slot(cfg, d, "pre", "k0"),
            commit_now,
            "}",
            CP_ASYNC_COMMIT,
            "}",
            f"int cur_slot = 0, load_slot = {p};",
            "for (int step = 0; step < k_steps; ++step) {",
            cp_async_wait(p - 1),
            FENCE_PROXY_ASYNC,
            "SYNC_CUBE();",
            f"const bool more = step + {p} < k_steps;",
            "if (more) {",
            f"const i64 k0 = (i64)(step + {p}) * {sk};",
            self._issue_slot(cfg, d, "load_slot", "k0"),
            "}",
            CP_ASYNC_COMMIT,
            self.stage.execute(st, d, lhs_desc, rhs_desc, StageEventListener()),
            *([f"if (more) {{\n{commit_later}\n}}"] if commit_later else []),
            self.stage.wait(st, cfg.pending),
            f"cur_slot = cur_slot + 1 == {s} ? 0 : cur_slot + 1;",
            f"load_slot = load_slot + 1 == {s} ? 0 : load_slot + 1;",
            "}",
            self.stage.finish(st),
            self.write_output(cfg, d),
        ])
