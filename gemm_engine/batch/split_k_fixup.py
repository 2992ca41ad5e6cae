"""Split-K in one launch: the K ranges' partial sums added by the last cube of each tile.

`SplitKBatchMatmul` adds the ranges' partial tiles in a second kernel. Where the whole product
takes a few microseconds (a quantized weight streamed at decode sizes: int4 4096 x 4096 is 8.4 MB,
2.8 us at 3 TB/s) that second launch is a large share of it. Here every cube stores its partial
tile into the workspace as before, makes it visible device-wide (`Dialect.fence_device`) and takes
a ticket on its tile's counter (`Dialect.ticket`); the cube that takes the last ticket reads every
range's partial tile (from L2: `Dialect.load_other_cube`), adds them in range order and stores the
sums through the call's epilogue, then resets the counter. The order of the additions is fixed
(range 0, 1, ...), not the order the cubes finish in: the same bits every run, no atomics on data.
Nothing waits on another cube, so any number of cubes may be resident at once.

The counters (one per output tile) are *kept* scratch (`Runtime.kept_scratch`): zeroed once per
stream, every kernel leaves them zero (the last cube resets its tile's).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..codegen.signature import array
from ..dtypes import INT32
from ..problem import MatmulProblem
from .base import KEPT_SCRATCH, KERNEL_NAME, Launch, Workspace
from .split_k import SplitKBatchConfig, SplitKBatchMatmul


class SplitKFixupBatchMatmul(SplitKBatchMatmul):
    name = "split_k_fixup_batch"

    def launches(self, cfg: SplitKBatchConfig, problem: MatmulProblem) -> list[Launch]:
        return [Launch(KERNEL_NAME, self.tiles(cfg, problem) * cfg.splits, cfg.units)]

    def kept_workspace(self, cfg: SplitKBatchConfig, problem: MatmulProblem) -> Workspace:
        return Workspace(INT32, self.tiles(cfg, problem))

    def signature(self, cfg):
        return super().signature(cfg).extended(array(KEPT_SCRATCH, INT32.storage, writable=True))

    def kernel_head(self, cfg: SplitKBatchConfig, d: Dialect) -> list[str]:
        # Shared memory at the kernel's outermost scope (OpenCL's rule): whether this cube is last.
        return super().kernel_head(cfg, d) + [f"LOCAL int {self.shared_flag()};"]

    def kernel(self, cfg: SplitKBatchConfig, d: Dialect) -> str:
        main = super(SplitKBatchMatmul, self).kernel(cfg, d)     # the partitioned kernel (no reduce kernel)
        cut = main.rstrip().rfind("}")
        return main[:cut] + self.fixup(cfg, d) + "\n}\n"

    def shared_flag(self) -> str:
        return "fixup_last"

    def fixup(self, cfg: SplitKBatchConfig, d: Dialect) -> str:
        """After the global level's body: this cube's ticket, and the last cube's sums."""
        stage = cfg.global_.stage
        sm, sn, units = stage.stage_m, stage.stage_n, cfg.units
        acc_t = d.storage_type(cfg.global_.out)
        value = cfg.epilogue.apply(d, "fixup_sum", "fixup_row", "fixup_col")
        flag = self.shared_flag()
        return "\n".join([
            "/* == split-K fixup: the last cube of this tile adds the ranges' partial tiles in order == */",
            d.fence_device(),
            "SYNC_CUBE();",
            f"if (UNIT_ID == 0) {flag} = {d.ticket(f'{KEPT_SCRATCH} + cube')} == {cfg.splits - 1};",
            "SYNC_CUBE();",
            f"if ({flag}) {{",
            d.fence_device(),
            f"GLOBAL {d.storage_type(cfg.result)}* fixup_out = out_base + out_offset + b * out_batch_stride;",
            *cfg.epilogue.pointers(d),
            f"const GLOBAL {acc_t}* fixup_parts = workspace + b * {cfg.splits} * M * N;",
            f"for (int fixup_i = UNIT_ID; fixup_i < {sm * sn}; fixup_i += {units}) {{",
            f"const i64 fixup_row = cube_m0 + fixup_i / {sn}, fixup_col = cube_n0 + fixup_i % {sn};",
            "if (fixup_row < M && fixup_col < N) {",
            f"{acc_t} fixup_sum = {d.load_other_cube(acc_t, 'fixup_parts', 'fixup_row * N + fixup_col')};",
            f"for (int fixup_s = 1; fixup_s < {cfg.splits}; ++fixup_s) fixup_sum += "
            f"{d.load_other_cube(acc_t, 'fixup_parts', 'fixup_s * M * N + fixup_row * N + fixup_col')};",
            d.store_global(cfg.result, "fixup_out", "fixup_row * out_ld + fixup_col", value),
            "}",
            "}",
            f"if (UNIT_ID == 0) {KEPT_SCRATCH}[cube] = 0;  /* the next kernel finds it zero */",
            "}",
        ])
