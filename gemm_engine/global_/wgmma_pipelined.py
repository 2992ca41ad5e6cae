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
from ..tile.wgmma import ATOM_BYTES, check_wgmma_device
from .pipelined import PipelinedGlobalConfig, PipelinedGlobalMatmul, edge_checks
from .swizzled_loader import SwizzledChunkLoader, SwizzledOperandTile



@dataclass(frozen=True)
class WgmmaPipelinedConfig(PipelinedGlobalConfig):
    pending: int = 1
    staged_output: bool = False   # write through a shared-memory tile (see `write_output`)

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
        check_m, check_n, check_k = edge_checks(problem, stage)
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
                                   pending=pending, staged_output=getattr(selection, "staged_output", False))
        self._check_ring_fits(cfg, dialect)
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

    def _issue(self, cfg: WgmmaPipelinedConfig, d: Dialect, slot: str, k0: str) -> str:
        lhs, rhs = self.lhs_loader, self.rhs_loader
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        return "\n".join([lhs.issue(cfg.lhs_loader, d, f"(lhs_ring + ({slot}) * {lb}u)", "cube_m0", k0, "M", "K"),
                          rhs.issue(cfg.rhs_loader, d, f"(rhs_ring + ({slot}) * {rb}u)", k0, "cube_n0", "K", "N"),
                          lhs.advance(cfg.lhs_loader, cfg.stage.stage_k),
                          rhs.advance(cfg.rhs_loader, cfg.stage.stage_k)])

    def _commit(self, cfg: WgmmaPipelinedConfig, d: Dialect, slot: str) -> str:
        lb, rb = cfg.lhs_loader.smem_bytes, cfg.rhs_loader.smem_bytes
        parts = [self.lhs_loader.commit(cfg.lhs_loader, d, f"(lhs_ring + ({slot}) * {lb}u)"),
                 self.rhs_loader.commit(cfg.rhs_loader, d, f"(rhs_ring + ({slot}) * {rb}u)")]
        return "\n".join(p for p in parts if p)

    # -- output through shared memory: whole 16-byte rows segments instead of scattered pairs ------
    def staged_ld(self, cfg: WgmmaPipelinedConfig) -> int:
        """Row pitch (elements) of the output tile staged in the ring: 16 bytes of padding, so the
        8 rows one warp's accumulator store touches start in different banks."""
        return cfg.stage.stage_n + 16 // cfg.out.itemsize

    def stages_output(self, cfg: WgmmaPipelinedConfig) -> bool:
        """Whether the output tile fits in the ring (it is free once the last wgmma batch is done)."""
        return (cfg.staged_output and
                cfg.stage.stage_m * self.staged_ld(cfg) * cfg.out.itemsize <= cfg.stages * cfg.shared_memory_bytes)

    def write_output(self, cfg: WgmmaPipelinedConfig, d: Dialect) -> str:
        """Accumulators (through the epilogue, converted) go to a tile in the ring, then the cube
        copies the tile out in 16-byte segments along rows: the wgmma fragment layout gives each
        lane two adjacent elements of eight rows, so direct stores write 8 scattered 16-byte pieces
        per warp instruction (measured on the H100: 8192 x 8192 x 64 bf16 ran at 0.147 ms, a third
        of the output bandwidth). Falls back to direct stores where the tile does not fit."""
        if not self.stages_output(cfg):
            return super().write_output(cfg, d)
        st, et = cfg.stage, cfg.out
        ld, vec = self.staged_ld(cfg), 16 // et.itemsize
        out_t = d.storage_type(et)
        per_row = st.stage_n // vec

        def to_tile(row, col, value):
            store = d.store_global(et, "out_tile", f"({row}) * {ld} + {col}", self.output_value(cfg, d, row, col, value))
            return self.guarded(cfg, row, col, store)   # c and bias are read in range only

        element = (f"for (int e = 0; e < {vec}; ++e) if (cube_n0 + c + e < N) "
                   f"out[(cube_m0 + r) * out_ld + cube_n0 + c + e] = out_tile[r * {ld} + c + e];")
        return "\n".join([
            # No copy may still land in the ring (a prefetch past K), and every warpgroup is past
            # its last wgmma: then the ring is free for the output tile.
            d.cp_async_wait_all(),
            "SYNC_CUBE();",
            "{",
            f"{out_t}* out_tile = ({out_t}*)gemm_ring;",
            self.stage.write(cfg.stage, d, to_tile),
            "SYNC_CUBE();",
            f"const bool out_vectors = ((((unsigned long long)out) | (unsigned long long)(out_ld * {et.itemsize})) & 15) == 0;",
            f"for (int i = UNIT_ID; i < {st.stage_m * per_row}; i += {st.units}) {{",
            f"const int r = i / {per_row}, c = (i % {per_row}) * {vec};",
            "if (cube_m0 + r < M) {",
            f"if (out_vectors && cube_n0 + c + {vec} <= N) "
            f"{d.vector_ref('global', 'f32', 4, '(out + (cube_m0 + r) * out_ld + cube_n0 + c)')} = "
            f"{d.vector_ref('local', 'f32', 4, f'(out_tile + r * {ld} + c)')};",
            f"else {element}",
            "}",
            "}",
            "}",
        ])

    def body(self, cfg: WgmmaPipelinedConfig, d: Dialect) -> str:
        st = cfg.stage
        lb, rb = cfg.lhs_loader.smem_bytes >> 4, cfg.rhs_loader.smem_bytes >> 4
        return self._ring_body(
            cfg, d, prefetch=cfg.prefetch,
            loader_declarations=[self.lhs_loader.declare(cfg.lhs_loader, d, "cube_m0", "0"),
                                 self.rhs_loader.declare(cfg.rhs_loader, d, "0", "cube_n0")],
            lhs_cur=f"(lhs_desc0 + (unsigned long long)(cur_slot * {lb}))",
            rhs_cur=f"(rhs_desc0 + (unsigned long long)(cur_slot * {rb}))",
            before_barrier=(d.fence_proxy_async(),), after_compute=(self.stage.wait(st, d, cfg.pending),),
            after_loop=(self.stage.finish(st, d),))
