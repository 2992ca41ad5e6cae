"""Quantized wgmma global matmul: ``x (M, K) @ W (K, N)`` with W quantized, on Hopper's warpgroup
MMA with the dequantized weights as its register operand, for the sizes past decode (M of about 32
to a few thousand) where each weight value serves many rows of x.

The product is computed transposed, as the decode level computes it (quantized_decode.py):
``out^T (N x M) = W^T (N x K) @ x^T``. wgmma takes its A operand (64 rows x 16 of K) from registers
and only B from shared memory, so the weights become A, built in registers from their packed words
by the decode level's pair arithmetic (dequant_words.py) and never written back as 16-bit values,
and x becomes B, its rows (``tokens`` of them a cube: the instruction's n) in the 128-byte-swizzled
K-major layout the dense wgmma kernels give their operands (`SwizzledChunkLoader`, whose copies this
level issues).

A cube has ``warpgroups`` x ``k_split`` warpgroups of 128 units: ``warpgroups`` column groups,
each owning ``a_tiles`` A tiles of 64 weight columns (``64 * a_tiles * warpgroups`` output columns
and ``tokens`` output rows a cube), and with ``k_split = 2`` two warpgroups a column group, each
multiplying its half (``sub_k`` rows) of every slot's rows of K; at the end the second leaves its
sums in the ring (every copy and batch done) and the first adds them and stores. Every unit
takes part in the copies (with ``producer=1`` a producer warpgroup issues them instead:
quantized_wgmma_roles.py): a ring of ``stages`` slots, each ``block_k`` rows of K of x (swizzled)
and the same rows of the weight's packed words (the cube's columns, row by row), filled by
``cp.async`` ``stages - a_buffers`` slots ahead. Per slot, each lane reads the words its A fragments need (lane (g, t)
of warp w: columns ``16 w + g`` and ``+ 8`` of each tile, rows of K ``2t, 2t + 1`` and ``2t + 8,
2t + 9`` of each 16: one pair of codes of one word each, the word shifted once so that the pair is
its lowest), dequantizes them into one of ``a_buffers`` (B) A register buffers, fences, issues the
slot's wgmma batch (``sub_k / 16`` steps x ``a_tiles``) and waits until at most B - 1 batches are pending. So a
slot's conversion runs while the tensor cores multiply the ones before, and an A buffer or slot is
rewritten only after the batch that read it is done:

    prologue: slots 0 .. P-1 (P = stages - B), one cp.async group each
    block i:  cp.async.wait_group P-1; fence.proxy.async; barrier (slot i is there for all; every
              warpgroup is past block i-1's wait, so batch i-B is done and slot i+P's last
              reader, batch i+P-stages = i-B, with it)
              copies of block i+P into its slot, commit
              block i's scales converted, A buffer i % B <- block i's words
              the stored bits of block i+1's scales into raw buffer (i+1) % B, converted only when
              block i+1 starts (a warp waits for a load where its value is first used: converted
              here, each block waited for an L2 read before its batch)
              wgmma.fence; the batch; commit; wgmma.wait_group B-1
    (blocks in runs of B, one per A buffer, unconditionally: see `body`)

The scales: one per (group, column), loaded per lane from global memory (L2) for its columns.
Stores: each accumulator straight from its register through the epilogue (`GlobalMatmul.store`).

Bounds: x rows past M and K are copied as zeros (never stored, and zero products); weight word rows
past K and column groups past N as zeros (those columns never stored); the scales' column and row
clamped to the last. Packed rows are padded to whole 16 bytes (quant/codes.py `WORD_PITCH`) and
prepacked strips are whole 64 columns, so a copy that starts before N reads inside the weight.
"""
from __future__ import annotations

import math

from ..codegen.dialect import Dialect
from ..compose.selection import Knob
from ..dtypes import PACKED_WORDS
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..tile.wgmma import ATOM_BYTES, SwizzledOperandLayout, check_wgmma_device
from .base import GlobalMatmul
from .dequant_words import (fast_pairs, fragment_weights, fragment_word, raw_scale_loads, scale_registers,
                            scale_statements)
from .quantized_decode_config import DecodeRead, DecodeTiling, KINDS
from .quantized_wgmma_config import (A_ROWS, BLOCK_K, CONSUMER_REGISTERS, PRODUCER_UNITS, WARPGROUP,
                                     QuantizedWgmmaConfig, default_tokens)
from .quantized_wgmma_roles import check_register_split, producer_body
from .tma_specialized_config import REGISTER_FILE   # 32-bit registers of a multiprocessor
from .read.loaders import OperandTile
from .read.swizzled_loader import SwizzledChunkLoader, SwizzledOperandTile

#: Accumulator registers a unit may hold (a_tiles x tokens / 2); setup also counts the A buffers
#: against the 255 a unit can have (auto's tilings reach 205-255).
MAX_ACCUMULATORS = 128


class QuantizedWgmmaGlobalMatmul(GlobalMatmul):
    """Copies x and the words itself (x's by a `SwizzledChunkLoader`): no stage, loaders or writer."""

    name = "quantized_wgmma_global"
    uses = ()
    reads_quantized = True
    stores_pairs = False     # each accumulator stored alone (a gated epilogue is refused)
    knobs = (Knob("warpgroups", 2, "column groups of a cube, a warpgroup (128 units) each (k_split of them with "
                                    "k_split)"),
             Knob("a_tiles", 1, "64-column A tiles per warpgroup"),
             Knob("tokens", 0, "rows of x per cube, the instruction's n: a multiple of 32 up to 256 (0: "
                               "chosen by M)"),
             Knob("stages", 4, "slots of the shared-memory ring (stages - a_buffers in flight)"),
             Knob("block_k", 64, "rows of K a slot holds: 64 or 128 (half the barriers and waits a row of K, "
                                 "twice the A registers)"),
             Knob("k_split", 1, "warpgroups sharing each column tile, each multiplying its part of a slot's rows "
                                "of K (1 or 2; their sums added through shared memory at the end; 2 measured "
                                "slower or level on the H100: bench/SELECTION_NOTES.md)"),
             Knob("a_buffers", 0, "A register buffers: wgmma batches left pending (a_buffers - 1) while the "
                                  "next block converts (2 or 3; 0: 2, measured faster than 3 at every size tried)"),
             Knob("producer", 0, "1: a producer warpgroup issues every copy on mbarriers, two consumer warpgroups "
                                 "only convert and multiply (global_/quantized_wgmma_roles.py); 0: every unit copies"))
    x_loader = SwizzledChunkLoader()

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> QuantizedWgmmaConfig:
        check_wgmma_device(self.name, dialect, cuda_only=True)   # its dequantizing pairs are CUDA's
        w = fragment_weights(self.name, problem, "wgmma's register operand takes 16-bit values")
        g, bk, ks = w.group_size, selection.block_k, selection.k_split
        if bk not in (BLOCK_K, 2 * BLOCK_K):
            raise SetupError(self.name, f"block_k={bk!r}: {BLOCK_K} or {2 * BLOCK_K}")
        if ks not in (1, 2):
            raise SetupError(self.name, f"k_split={ks!r}: 1 or 2")
        sub = bk // ks
        if g and (g % 16 or (g < sub and sub % g) or (g > sub and g % sub)):
            raise SetupError(self.name, f"group_size={g}: a multiple of 16 rows of K that divides or is a multiple "
                                        f"of the {sub} rows of a warpgroup's part of a slot")
        warpgroups, a_tiles, stages, buffers = (selection.warpgroups, selection.a_tiles, selection.stages,
                                                selection.a_buffers)
        x_layout = Layout(problem.lhs_layout)
        tokens = selection.tokens or min(default_tokens(problem.m, 64 if x_layout is Layout.COL else 32),
                                         2 * MAX_ACCUMULATORS // max(1, a_tiles))
        for label, value in (("warpgroups", warpgroups), ("a_tiles", a_tiles), ("stages", stages), ("tokens", tokens)):
            if not isinstance(value, int) or value < 1:
                raise SetupError(self.name, f"{label}={value!r} must be a positive int")
        if 8 % a_tiles:
            raise SetupError(self.name, f"a_tiles={a_tiles}: 1, 2, 4 or 8 (the units copy whole word rows)")
        if warpgroups > 2:
            raise SetupError(self.name, f"warpgroups={warpgroups}: at most 2")
        if tokens % 32 or tokens > 256:
            raise SetupError(self.name, f"tokens={tokens}: a multiple of 32 up to 256 (wgmma's n)")
        if x_layout is Layout.COL and tokens % 64:
            raise SetupError(self.name, f"tokens={tokens}: a column-major x is copied in atoms of 64 rows")
        if a_tiles * tokens // 2 > MAX_ACCUMULATORS:
            raise SetupError(self.name, f"a_tiles={a_tiles} x tokens={tokens}: {a_tiles * tokens // 2} accumulators "
                                        f"a unit; at most {MAX_ACCUMULATORS}")
        # Two: a third buffer costs more than its overlap gains (SELECTION_NOTES "Quantized wgmma").
        buffers = buffers or 2
        if buffers not in (2, 3):
            raise SetupError(self.name, f"a_buffers={buffers!r}: 2 or 3")
        if stages <= buffers:
            raise SetupError(self.name, f"stages={stages}: more than a_buffers={buffers} (a slot in flight)")
        if selection.producer not in (0, 1):
            raise SetupError(self.name, f"producer={selection.producer!r}: 0 or 1")
        producer = bool(selection.producer)
        if producer and ks > 1:
            raise SetupError(self.name, f"producer=1 with k_split={ks}: the split warpgroups' sums meet through the "
                                        "ring, which the producer may still be filling (k_split=1, or producer=0)")
        if producer and selection.warpgroups != 2:
            raise SetupError(self.name, f"producer=1 with warpgroups={selection.warpgroups}: its register split needs "
                                        "three warpgroups (warpgroups=2)")
        stage_n = A_ROWS * a_tiles * warpgroups
        units = WARPGROUP * warpgroups * ks
        stage_k = bk * g // math.gcd(bk, g) if g else bk
        stage = DecodeTiling(stage_m=tokens, stage_n=stage_n, stage_k=stage_k, units=units)
        check_m, check_n, check_k = problem.checks(tokens, stage_n, bk)
        swizzle = SwizzledOperandLayout(mn_major=x_layout is Layout.COL, extent=tokens, stage_k=bk)
        x_tile = SwizzledOperandTile("lhs", problem.lhs, x_layout, tokens, bk, check_m, check_k, 0,
                                     k_along_rows=False, smem_word=problem.lhs.storage, align=problem.lhs_align,
                                     extent=problem.k if x_layout is Layout.ROW else problem.m, swizzle=swizzle)
        rhs = DecodeRead(OperandTile("rhs", PACKED_WORDS, Layout.ROW, bk, stage_n, check_k, check_n, 0,
                                     k_along_rows=True, weights=w))
        x_loader = self.x_loader.setup(x_tile, PRODUCER_UNITS if producer else units)
        cfg = QuantizedWgmmaConfig(stage=stage, lhs_loader=x_loader, rhs_loader=rhs,
                                   out=problem.out, check_m=check_m, check_n=check_n, check_k=check_k, weights=w,
                                   warpgroups=warpgroups, a_tiles=a_tiles, tokens=tokens, stages=stages,
                                   a_buffers=buffers, block_k=bk, k_split=ks, kind=KINDS[problem.lhs.name],
                                   fast_pairs=fast_pairs(problem, dialect), x_layout=swizzle, producer=producer)
        if producer and cfg.lhs_loader.registers:
            raise SetupError(self.name, "producer=1: x's rows are not 4-byte aligned, so its copies go through the "
                                        "copying unit's registers, which only the copying form has (producer=0)")
        # Accumulators, the A buffers and about 32 more (addresses, scales): ptxas serializes the batches
        # (C7511) or spills past the unit's share (with a producer: what it gives back by setmaxnreg).
        need = a_tiles * tokens // 2 + buffers * 4 * a_tiles * (bk // ks // 16) + 32
        limit = CONSUMER_REGISTERS if producer else min(255, REGISTER_FILE // cfg.units)
        check_register_split(self.name, cfg)
        if need > limit:
            raise SetupError(self.name, f"{cfg.units} units have at most {limit} registers each: "
                                        f"too few for {a_tiles * tokens // 2} accumulators and {buffers} A buffers "
                                        f"(fewer tokens, a_tiles or rows of K a slot, or k_split=1)")
        if ks > 1 and cfg.stages * cfg.slot_bytes < 4 * WARPGROUP * warpgroups * a_tiles * tokens // 2:
            raise SetupError(self.name, f"k_split={ks}: the ring's {cfg.stages * cfg.slot_bytes} bytes cannot hold a "
                                        f"warpgroup's sums for the other")
        if cfg.dynamic_shared_bytes > dialect.device.max_shared_memory:
            raise SetupError(self.name, f"{stages} slots of {cfg.slot_bytes} bytes exceed the device's "
                                        f"{dialect.device.max_shared_memory} bytes of shared memory")
        return cfg

    # -- codegen -------------------------------------------------------------------------------------
    def shared_declarations(self, cfg: QuantizedWgmmaConfig, d: Dialect) -> str:
        return "\n".join([
            d.dynamic_shared("qw_ring"),
            f"const unsigned qw_ring_base = ({d.shared_address('qw_ring')} + {ATOM_BYTES - 1}u) & ~{ATOM_BYTES - 1}u;",
            # The same bytes through a generic pointer: the lanes' reads of the weight words.
            f"const unsigned char* qw_ring_ptr = qw_ring + (qw_ring_base - {d.shared_address('qw_ring')});",
            # With a producer: a full and an empty mbarrier a slot, after the ring.
            *([f"const unsigned qw_bars = qw_ring_base + {cfg.stages * cfg.slot_bytes}u;"] if cfg.producer else []),
        ])

    def _a_columns(self, cfg: QuantizedWgmmaConfig) -> str:
        """Expression: the cube column of the lane's first A row (tile 0, row g)."""
        return f"{A_ROWS * cfg.a_tiles} * qw_wg + 16 * qw_warp + qw_g"

    def _weight_copies(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope, slot: str) -> list[str]:
        """Statements: this unit's 16-byte copies of the block's words (from row ``qw_kw``) into ``slot``."""
        chunks_per_row = cfg.stage.stage_n // 4
        step = cfg.stage.units // chunks_per_row
        lines = []
        for task in range(-(-cfg.word_rows // step)):
            row = f"qw_wrow + {task * step}"
            conds = [f"{row} < {cfg.word_rows}"] if (task + 1) * step > cfg.word_rows else []
            valid = [f"qw_kw + {row} < qw_kwords"] + ([f"qw_wcol < {scope.n}"] if cfg.check_n else [])
            src = f"{scope.rhs.ptr} + {cfg.weights.word_index(f'qw_kw + {row}', 'qw_wcol', scope.rhs.ld)}"
            dst = f"{slot} + {cfg.x_bytes}u + (unsigned)(({row}) * {4 * cfg.row_words} + 16 * qw_wchunk)"
            copy = d.cp_async("cg", 16, dst, f"({' && '.join(valid)}) ? {src} : {scope.rhs.ptr}",
                              f"({' && '.join(valid)}) ? 16 : 0")
            lines.append(f"if ({' && '.join(conds)}) {copy}" if conds else copy)
        return lines

    def _issue(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope, block: str) -> str:
        """Statement: every copy of block ``block`` into its slot (x's pointer moves on by a block)."""
        slot = f"(qw_ring_base + (unsigned)(({block}) % {cfg.stages}) * {cfg.slot_bytes}u)"
        x = self.x_loader
        return "\n".join([
            "{",
            f"const i64 qw_kw = ({block}) * {cfg.word_rows};",
            x.issue(cfg.lhs_loader, d, scope.lhs, slot, scope.m0, f"({block}) * {cfg.block_k}", scope.m, scope.k),
            x.commit(cfg.lhs_loader, d, slot),      # x's register path (rows not 4-byte aligned): stored now
            x.advance(cfg.lhs_loader, scope.lhs, cfg.block_k),
            *self._weight_copies(cfg, d, scope, slot),
            "}"])

    def scale_loads(self, cfg: QuantizedWgmmaConfig, scope, block: str, buf: int) -> list[str]:
        """Statements: the stored bits of the scales (and zeros) of the lane's columns for block
        ``block`` into raw buffer ``buf`` (converted when the block starts: `scale_values`)."""
        lines = []
        for q in range(cfg.scale_rows):
            k = f"({block}) * {cfg.block_k} + qw_ksub + {q * cfg.weights.group_size if cfg.scales_per == 'step' else 0}"
            k = f"(({k}) < {scope.k} ? ({k}) : {scope.k} - 1)"
            for r in range(cfg.a_tiles):
                for h in range(2):
                    i = self._scale_index(cfg, q, r, h)
                    lines.append(raw_scale_loads(cfg.weights, k, f"qw_scol{r}{h}", f"qw_rs{buf}[{i}]",
                                                 f"qw_rz{buf}[{i}]"))
        return lines

    def scale_values(self, cfg: QuantizedWgmmaConfig, d: Dialect, buf: int) -> list[str]:
        """Statements: raw buffer ``buf`` converted into the registers `fragment_word` reads."""
        w, lines = cfg.weights, []
        for i in range(cfg.scale_rows * cfg.a_tiles * 2):
            values = (d.load_global(w.scale_type, f"qw_rs{buf}", str(i)),
                      d.load_global(w.scale_type, f"qw_rz{buf}", str(i)) if w.zeros else None)
            lines.append(scale_statements(w, d, cfg.kind, cfg.fast_pairs, "", "", f"qw_s[{i}]", f"qw_z[{i}]",
                                          values))
        return lines

    @staticmethod
    def _scale_index(cfg: QuantizedWgmmaConfig, q: int, r: int, h: int) -> int:
        return (q * cfg.a_tiles + r) * 2 + h

    def dequantize(self, cfg: QuantizedWgmmaConfig, d: Dialect, block: str, buf: int) -> list[str]:
        """Statements: A buffer ``buf`` from block ``block``'s words (the scales of `scale_values`)."""
        w, p = cfg.weights, cfg.per_word
        words = f"((const unsigned*)(qw_ring_ptr + (({block}) % {cfg.stages}) * {cfg.slot_bytes} + {cfg.x_bytes}))"
        lines = []
        for s in range(cfg.sub_k // 16):
            q = (16 * s) // w.group_size if cfg.scales_per == "step" else 0
            for r in range(cfg.a_tiles):
                regs = []
                for reg in range(4):        # a0: row g, k 2t..; a1: row g + 8; a2, a3: k 2t + 8..
                    h, second = reg % 2, reg // 2
                    krow = (16 * s + 8 * second) // p          # the word row of k 16s + 8 second (+ 2t)
                    at = f"qw_woff + {krow * cfg.row_words + A_ROWS * r + 8 * h}"
                    word = f"({words}[{at}] >> qw_shift)"
                    i = self._scale_index(cfg, q, r, h)
                    regs.append(fragment_word(w, d, cfg.kind, cfg.fast_pairs, word, 0, f"qw_s[{i}]", f"qw_z[{i}]",
                                              f"qw_s[{i}]", f"qw_z[{i}]"))
                base = self._a_index(cfg, s, r)
                lines.append(" ".join(f"qw_a{buf}[{base + j}] = {v};" for j, v in enumerate(regs)))
        return lines

    @staticmethod
    def _a_index(cfg: QuantizedWgmmaConfig, s: int, r: int) -> int:
        return (s * cfg.a_tiles + r) * 4

    def wgmma_batch(self, cfg: QuantizedWgmmaConfig, d: Dialect, block: str, buf: int) -> list[str]:
        """Statements: the block's wgmma batch on A buffer ``buf``, committed."""
        # Every A value computed before the fence: ptxas serializes the batch (waits after each
        # instruction) if anything defines an A register between the fence and the commit.
        lines = [d.pin_registers(f"(int*)qw_a{buf}", 4 * cfg.a_tiles * (cfg.sub_k // 16), "i32"), d.wgmma_fence()]
        trans = 1 if cfg.x_layout.mn_major else 0
        for s in range(cfg.sub_k // 16):
            # qw_xsub: this warpgroup's part of the slot (its first row of K, in bytes; linear in the
            # part, which stays within one 64-row swizzle run or starts one).
            desc = (f"qw_xdesc0 + (unsigned long long)(((({block}) % {cfg.stages}) * {cfg.slot_bytes} + qw_xsub + "
                    f"{cfg.x_layout.tile_offset_bytes(0, 16 * s)}) >> 4)")
            for r in range(cfg.a_tiles):
                lines.append(d.wgmma_rs(cfg.tokens, cfg.kind, f"qw_acc + {r * cfg.tokens // 2}",
                                        f"qw_a{buf} + {self._a_index(cfg, s, r)}", desc, trans))
        return lines + [d.wgmma_commit()]

    def _block(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope, block: str, buf: int) -> str:
        ahead = cfg.stages - cfg.a_buffers
        once = cfg.scales_per == "once"
        scales = [] if once else self.scale_loads(cfg, scope, f"{block} + 1", (buf + 1) % cfg.a_buffers)
        return "\n".join([
            "{",
            d.cp_async_wait(ahead - 1),
            d.fence_proxy_async(),
            "SYNC_CUBE();",
            f"if ({block} + {ahead} < qw_blocks) {self._issue(cfg, d, scope, f'{block} + {ahead}')}",
            d.cp_async_commit(),
            *([] if once else self.scale_values(cfg, d, buf)),
            *self.dequantize(cfg, d, block, buf),
            *scales,
            *self.wgmma_batch(cfg, d, block, buf),
            d.wgmma_wait(cfg.a_buffers - 1),
            "}"])

    def body(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> str:
        if cfg.producer:
            return producer_body(self, cfg, d, scope)
        p, accs = cfg.per_word, cfg.a_tiles * cfg.tokens // 2
        listener = self.chain()
        chunks_per_row = cfg.stage.stage_n // 4
        lines = [
            *self.kernel_start(listener),
            *self.lane_state(cfg, d, scope),
            f"const int qw_wchunk = UNIT_ID % {chunks_per_row}, qw_wrow = UNIT_ID / {chunks_per_row};",
            f"const i64 qw_wcol = {scope.n0} + 4 * qw_wchunk;",
            f"const i64 qw_kwords = ({scope.k} + {p - 1}) / {p};",
            f"const i64 qw_blocks = ({scope.k} + {cfg.block_k - 1}) / {cfg.block_k};",
            self.x_loader.declare(cfg.lhs_loader, d, scope.lhs, scope.m0, "0"),
        ]
        lines += self.scale_state(cfg, d, scope)
        lines += [f"if ({i} < qw_blocks) {self._issue(cfg, d, scope, str(i))}\n{d.cp_async_commit()}"
                  for i in range(cfg.stages - cfg.a_buffers)]
        lines += [
            *self.block_runs(cfg, lambda block, buf: self._block(cfg, d, scope, block, buf)),
            d.wgmma_wait(0),
            d.pin_registers("qw_acc", accs),
            d.cp_async_wait_all(),
            *self._add_parts(cfg, accs),
            *self.before_store(listener),
        ]
        stores = self.stores(cfg, d, scope)
        if cfg.k_split > 1:
            stores = ["if (qw_kg == 0) {", *stores, "}"]
        return "\n".join(lines + stores)

    def lane_state(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> list[str]:
        """A multiplying unit's declarations: its warpgroup, part of a slot, lane, words' offset and
        shift, x's descriptor, its scale columns, accumulators and A buffers."""
        w, p, accs = cfg.weights, cfg.per_word, cfg.a_tiles * cfg.tokens // 2
        # The lane's pair (rows 2u, 2u + 1 of its words, u = t for int4, t % 2 for 8-bit codes) moved
        # to where rows 0 and 1 lie: linear in u in either layout (`WeightFormat.position`).
        u = "qw_t" if p == 8 else "(qw_t & 1)"
        lines = [
            f"const int qw_wg = {d.plane_uniform(f'UNIT_ID / {WARPGROUP} % {cfg.warpgroups}')};",
            # The warpgroup's part of each slot (k_split): its first row of K, bytes into x's slot.
            f"const int qw_kg = {d.plane_uniform(f'UNIT_ID / {WARPGROUP * cfg.warpgroups}')};",
            f"const int qw_ksub = qw_kg * {cfg.sub_k};",
            f"const unsigned qw_xsub = (unsigned)qw_kg * {cfg.x_layout.tile_offset_bytes(0, cfg.sub_k) if cfg.k_split > 1 else 0}u;",
            "const int qw_lane = UNIT_ID % 32, qw_warp = (UNIT_ID / 32) % 4;",
            "const int qw_g = qw_lane >> 2, qw_t = qw_lane & 3;",
            f"const unsigned qw_shift = {w.bits * w.position(2)} * {u};",
            # The lane's first word of a slot: its word row (8-bit codes: t / 2 rows on) and column.
            f"const int qw_woff = ({'(qw_t >> 1) + ' if p == 4 else ''}qw_ksub / {p}) * {cfg.row_words} + "
            f"{self._a_columns(cfg)};",
            f"const unsigned long long qw_xdesc0 = {cfg.x_layout.descriptor('qw_ring_base')};",
        ]
        for r in range(cfg.a_tiles):
            for h in range(2):
                col = f"{scope.n0} + {self._a_columns(cfg)} + {A_ROWS * r + 8 * h}"
                col = f"({col} < {scope.n} ? {col} : {scope.n} - 1)" if cfg.check_n else col
                lines.append(f"const i64 qw_scol{r}{h} = {col};")
        a_regs = 4 * cfg.a_tiles * (cfg.sub_k // 16)
        return lines + [f"float qw_acc[{accs}];", f"for (int qw_i = 0; qw_i < {accs}; ++qw_i) qw_acc[qw_i] = 0.0f;",
                        f"{d.c_type('u32')} " + ", ".join(f"qw_a{b}[{a_regs}]" for b in range(cfg.a_buffers)) + ";"]

    def scale_state(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> list[str]:
        """Declarations of the scales' raw buffers and registers, and block 0's loads."""
        w, count = cfg.weights, cfg.scale_rows * cfg.a_tiles * 2
        raw, lines = d.c_type(w.scale), []
        for buf in ((0,) if cfg.scales_per == "once" else range(cfg.a_buffers)):
            lines.append(f"{raw} qw_rs{buf}[{count}];" + (f" {raw} qw_rz{buf}[{count}];" if w.zeros else ""))
        lines += scale_registers(w, d, cfg.fast_pairs, "qw_s", "qw_z", count)
        lines += self.scale_loads(cfg, scope, "0", 0)
        return lines + (self.scale_values(cfg, d, 0) if cfg.scales_per == "once" else [])

    @staticmethod
    def block_runs(cfg: QuantizedWgmmaConfig, block) -> list[str]:
        """The blocks of K: ``block(expression, buffer)`` in runs of a_buffers, then the last ones. None
        is conditional inside the loop: ptxas must see each buffer's batch retired (by a later block's
        wait) on every path before the buffer is written again, or it serializes."""
        nb = cfg.a_buffers
        return ["i64 qw_b = 0;", f"for (; qw_b + {nb - 1} < qw_blocks; qw_b += {nb}) {{",
                *(block(f"qw_b + {j}", j) for j in range(nb)), "}",
                *(f"if (qw_b + {j} < qw_blocks) {block(f'qw_b + {j}', j)}" for j in range(nb - 1))]

    @staticmethod
    def _add_parts(cfg: QuantizedWgmmaConfig, accs: int) -> list[str]:
        """With ``k_split``: the second warpgroup of each column tile leaves its sums in the ring
        (every copy and product done), the first adds them to its own (the same order every run)."""
        if cfg.k_split == 1:
            return []
        at = f"((float*)qw_ring_ptr)[(qw_i * {cfg.warpgroups} + qw_wg) * {WARPGROUP} + UNIT_ID % {WARPGROUP}]"
        return ["SYNC_CUBE();",
                f"if (qw_kg == 1) for (int qw_i = 0; qw_i < {accs}; ++qw_i) {at} = qw_acc[qw_i];",
                "SYNC_CUBE();",
                f"if (qw_kg == 0) for (int qw_i = 0; qw_i < {accs}; ++qw_i) qw_acc[qw_i] += {at};"]

    def stores(self, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> list[str]:
        """Each accumulator through the epilogue: register 4j + e of tile r holds output row (token)
        ``8j + 2t + e % 2`` and column ``16 w + g + 8 (e / 2)`` of the tile."""
        lines = []
        for r in range(cfg.a_tiles):
            for j in range(cfg.tokens // 8):
                for e in range(4):
                    row = f"{8 * j} + 2 * qw_t + {e & 1}"
                    col = f"{self._a_columns(cfg)} + {A_ROWS * r + 8 * (e >> 1)}"
                    lines.append(self.store(cfg, d, scope, row, col, f"qw_acc[{r * cfg.tokens // 2 + 4 * j + e}]"))
        return lines


__all__ = ["QuantizedWgmmaGlobalMatmul"]
