"""Quantized decode global matmul: ``x (M <= 64, K) @ W (K, N)`` with W quantized, streaming W once.

At decode sizes the product reads every packed weight once and little else; the kernel must keep
the weights' words flowing at the memory's rate and spend few instructions per weight. Each cube
owns ``32 * loads`` consecutive output columns and all M rows (in 8-row tiles); its ``planes``
planes split the cube's K range in blocks of ``unroll`` steps (plane p takes blocks p, p + planes,
...), and a deterministic reduction through shared memory adds the planes' partial sums. With
``planes_along="n"`` the planes instead take ``32 * loads`` columns each of a ``planes`` times
wider cube, all of its K range: they read the same x at the same time (one L2 read of x serves
the cube's planes through L1, where larger M makes x's traffic count) and need no reduction.

The product is computed transposed on the plane's m16n8k16 tensor-core instruction (`Dialect.
plane_mma`; an emulation through shared memory on OpenCL): ``out^T (N x M) = W^T (N x K) @ x^T``,
with the dequantized weights as the A operand, built in registers straight from the packed words,
and the activations as B. Two freedoms of the instruction make every load a whole 16-byte vector:

* the order of K inside one instruction does not matter as long as A and B agree: lane
  (g = lane / 4, t = lane % 4) feeds word row ``w0 + t`` of a step (a step is 4 word rows: 32 rows
  of K for int4, 16 for 8-bit codes), its codes 4s .. 4s + 3 going to k-step s's slots 2t, 2t + 1,
  2t + 8, 2t + 9; the same lane reads x's matching 8 (int4) or 4 (8-bit) consecutive elements of
  row g as one vector;
* the order of the output rows (N) inside a tile does not matter as long as the store knows it:
  lane g's A rows (g, g + 8 of each 16-row tile) are the columns ``32 h + 4 g + c`` (c = 0..3) of its
  16-byte loads h, so the eight lanes of one t read 128 contiguous bytes of a word row.

Per step a lane issues ``loads`` 16-byte weight loads (4 words: 4 columns x one word row), one x
vector per 8-row tile, and the scales (and zeros) of its columns once per group (per block when a
group spans whole blocks); every load of a block is issued before its first multiply. The weights'
values are rounded once to x's 16-bit type (``(code - zero) * scale`` in float32, exact, then one
rounding), as `QuantizedWeight.dequantize(rounded_to=...)` gives them.

Bounds: rows of K past the range read the last word row and multiply zeros of x; columns past N
read the last 16-byte column group and are never stored; rows of M past M read x's last row and
are never stored. The loops are uniform across the cube (every plane runs every round, an idle one
on zeros), as the emulated instruction's barriers need.
"""
from __future__ import annotations

import math

from ..codegen.dialect import Dialect
from ..compose.selection import Knob
from ..dtypes import PACKED_WORDS
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from .base import GlobalMatmul
from .dequant_words import fast_pairs, fragment_weights, fragment_word, scale_registers, scale_statements
from .quantized_decode_config import (KINDS, MAX_M_TILES, PLANE, STEP_WORDS, DecodeConfig, DecodeRead,
                                      DecodeTiling, default_prefetch, default_tiling)
from .read.loaders import OperandTile

class QuantizedDecodeGlobalMatmul(GlobalMatmul):
    """Reads the activations and the packed weights itself: no stage, loaders or writer."""

    name = "quantized_decode_global"
    uses = ()
    reads_quantized = True
    stores_pairs = False     # each accumulator stored alone (a gated epilogue is refused)
    knobs = (Knob("planes", 4, "planes per cube, splitting its K range"),
             Knob("column_loads", 0, "16-byte weight loads per lane and step: 32 columns each (0: chosen by M)"),
             Knob("unroll", 0, "steps of 4 word rows per block, all loads of a block in flight (0: chosen by M)"),
             Knob("row_tiles", 0, "8-row tiles of x a cube holds (0: enough for M, or a typical group's rows); "
                                 "a grouped level gives a larger group more tiles"),
             Knob("planes_along", "k", "what the planes split: 'k' (the cube's K range, a reduction) or 'n' "
                                       "(the cube's columns: one x read for all of them)"),
             Knob("prefetch", -1, "1: each plane loads its next block while the current one multiplies (two "
                                  "register buffers), 0: loads then multiplies, -1: the default (one buffer: "
                                  "quantized_decode_config.default_prefetch)", (-1, 0, 1)))
    buffers = 1

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> DecodeConfig:
        w = fragment_weights(self.name, problem, "the decode kernel multiplies on 16-bit tensor-core fragments; "
                                                 "quantized_simple_unit runs others")
        if not dialect.supports("plane_mma"):
            raise SetupError(self.name, "the device has no m16n8k16 plane product (CUDA sm_80+, or its OpenCL "
                                        "emulation)")
        # A grouped problem's tile is sized for a typical group (or as ``row_tiles`` says: the grouped
        # rule's); a larger group takes more tiles, each streaming the group's weights again.
        if not isinstance(selection.row_tiles, int) or selection.row_tiles < 0:
            raise SetupError(self.name, f"row_tiles={selection.row_tiles!r} must be a non-negative int")
        m_tiles = selection.row_tiles or -(-problem.rows_per_group // 8)
        if m_tiles > MAX_M_TILES:
            raise SetupError(self.name, f"M = {problem.rows_per_group}{' rows a group' if problem.groups else ''}"
                                        f"{f' (row_tiles={m_tiles})' if selection.row_tiles else ''}: the decode "
                                        f"kernel holds at most {8 * MAX_M_TILES} rows of x (the tiled kernels run "
                                        f"larger M)")
        prefetch = default_prefetch() if selection.prefetch < 0 else bool(selection.prefetch)
        fast = fast_pairs(problem, dialect)
        loads, unroll = default_tiling(m_tiles, w.per_word, prefetch, fast)
        loads, unroll = selection.column_loads or loads, selection.unroll or unroll
        planes = selection.planes
        if selection.planes_along not in ("k", "n"):
            raise SetupError(self.name, f"planes_along={selection.planes_along!r}: 'k' or 'n'")
        along_n = selection.planes_along == "n"
        for label, value in (("planes", planes), ("column_loads", loads), ("unroll", unroll)):
            if not isinstance(value, int) or value < 1:
                raise SetupError(self.name, f"{label}={value!r} must be a positive int")
        if loads > 2:
            raise SetupError(self.name, f"column_loads={loads}: at most 2 (64 columns per plane; a prepacked "
                                        f"strip is 64 wide)")
        step_k = STEP_WORDS * w.per_word
        if w.group_size % step_k:
            raise SetupError(self.name, f"group_size={w.group_size} is not a multiple of a step's {step_k} rows "
                                        f"of K (quantized_simple_unit runs it)")
        units = planes * PLANE
        if units > dialect.device.max_threads_per_cube:
            raise SetupError(self.name, f"{planes} planes exceed the device's {dialect.device.max_threads_per_cube} "
                                        f"units per cube")
        block_k = unroll * step_k
        stage_k = block_k * w.group_size // math.gcd(block_k, w.group_size) if w.group_size else block_k
        stage = DecodeTiling(stage_m=8 * m_tiles, stage_n=32 * loads * (planes if along_n else 1), stage_k=stage_k,
                             units=units)
        x_vector = Layout(problem.lhs_layout) is Layout.ROW and problem.lhs_align >= w.per_word
        lhs = DecodeRead(OperandTile("lhs", problem.lhs, Layout(problem.lhs_layout), stage.stage_m, block_k,
                                     False, False, 0, k_along_rows=False, align=problem.lhs_align),
                         read_width=w.per_word if x_vector else None)
        rhs = DecodeRead(OperandTile("rhs", PACKED_WORDS, Layout.ROW, block_k, stage.stage_n, False, False, 0,
                                     k_along_rows=True, weights=w))
        cfg = DecodeConfig(stage=stage, lhs_loader=lhs, rhs_loader=rhs, out=problem.out,
                           check_m=problem.checks(stage.stage_m, 1, 1)[0], check_n=problem.n % stage.stage_n != 0,
                           check_k=False, weights=w, planes=planes, along_n=along_n, loads=loads, unroll=unroll,
                           m_tiles=m_tiles, prefetch=prefetch,
                           kind=KINDS[problem.lhs.name], x_vector=x_vector, fast_pairs=fast,
                           scratch=dialect.plane_mma_scratch())
        limit = min(dialect.device.max_shared_memory, 48 * 1024)
        if cfg.shared_memory_bytes > limit:
            raise SetupError(self.name, f"needs {cfg.shared_memory_bytes} bytes of shared memory (planes x "
                                        f"outputs for the reduction), the device allows {limit}")
        return cfg

    # -- codegen -------------------------------------------------------------------------------------
    def shared_declarations(self, cfg: DecodeConfig, d: Dialect) -> str:
        lines = [f"LOCAL float qd_reduce[{cfg.reduce_floats}] ALIGN16;"] if cfg.reduce_floats else []
        if cfg.scratch:
            lines.append(f"LOCAL float qd_scratch[{cfg.planes * cfg.scratch}] ALIGN16;")
        return "\n".join(lines)

    @staticmethod
    def column(cfg: DecodeConfig, tile: int, half: int) -> str:
        """Expression: the output column (relative to the cube's) of A row ``16 * tile + 8 * half +
        g``: word ``2 * (tile % 2) + half`` of the lane's 16-byte load ``tile / 2``."""
        return f"{32 * (tile // 2) + 2 * (tile % 2) + half} + 4 * qd_g"

    def _columns(self, cfg: DecodeConfig, scope) -> list[str]:
        """Statements: ``qd_col<h>``, the first global column of each of the lane's 16-byte loads, and
        ``qd_scol<h>``, the first column of its scales. Where N does not divide, both are clamped to
        the last whole group of 4 columns (valid memory, never stored); a prepacked weight's strips
        hold whole 64 columns, so only its scales' column is clamped."""
        out = []
        last = f"(({scope.n} + 3) / 4) * 4 - 4"
        for h in range(cfg.loads):
            plane = f" + qd_plane * {cfg.plane_columns}" if cfg.along_n else ""
            col = f"{scope.n0}{plane} + {32 * h} + 4 * qd_g"
            clamped = f"({col} < {last} ? {col} : {last})" if cfg.check_n else col
            out.append(f"const i64 qd_col{h} = {clamped if cfg.weights.layout == 'k_packed' else col};")
            out.append(f"const i64 qd_scol{h} = {clamped};")
        return out

    def _x_row(self, cfg: DecodeConfig, scope, j: int) -> tuple[str, str | None]:
        """(row expression, validity or None) of x tile j's row for this lane (clamped to M)."""
        row = f"{scope.m0} + {8 * j} + qd_g"
        if not cfg.check_m:
            return row, None
        return f"({row} < {scope.m} ? {row} : {scope.m} - 1)", f"{row} < {scope.m}"

    def _x_index(self, cfg: DecodeConfig, scope, row: str, k: str) -> str:
        op = cfg.lhs_loader.operand
        return op.global_index(row, k, scope.lhs.ld)

    def _loads(self, cfg: DecodeConfig, d: Dialect, scope, guarded: bool, buf: str = "") -> list[str]:
        """Statements filling the block's registers: weight words ``qd_w``, x pairs ``qd_x`` (and the
        scales where they change per block or step), of register buffer ``buf`` (a name suffix).
        ``guarded``: rows past the range are zeros."""
        w, p = cfg.weights, cfg.per_word
        u32 = d.c_type("u32")
        lines = []
        for u in range(cfg.unroll):
            krow = f"qd_kb + {u * cfg.step_k} + {p} * qd_t"        # this lane's first row of step u
            kw = f"(qd_kb + {u * cfg.step_k}) / {p} + qd_t"
            if guarded:
                kw = f"({kw} < qd_kwords ? {kw} : qd_kwords - 1)"
            for h in range(cfg.loads):
                vec = d.stream_vector("u32", 4, f"{scope.rhs.ptr} + {w.word_index(kw, f'qd_col{h}', scope.rhs.ld)}")
                base = (u * cfg.loads + h) * 4
                lines.append(f"{{ const {d.vector_type('u32', 4)} v = {vec}; qd_w{buf}[{base}] = v.x; "
                             f"qd_w{buf}[{base + 1}] = v.y; qd_w{buf}[{base + 2}] = v.z; qd_w{buf}[{base + 3}] = v.w; }}")
            for j in range(cfg.m_tiles):
                row, valid = self._x_row(cfg, scope, j)
                base = (u * cfg.m_tiles + j) * (p // 2)
                conds = [c for c in (valid,) if c]
                if cfg.x_vector and not guarded:
                    width = p // 2
                    vec = d.vector_ref("global", "u32", width, f"qd_xs + {self._x_index(cfg, scope, row, krow)}",
                                       const=True)
                    parts = "xyzw"[:width]
                    sel = f"({' && '.join(conds)})" if conds else None
                    lines.append("{ " + f"const {d.vector_type('u32', width)} v = {vec}; " + " ".join(
                        f"qd_x{buf}[{base + i}] = {f'{sel} ? v.{c} : 0u' if sel else f'v.{c}'};"
                        for i, c in enumerate(parts)) + " }")
                    continue
                for i in range(p // 2):
                    halves = []
                    for e in (2 * i, 2 * i + 1):
                        k = f"{krow} + {e}"
                        safe = f"(({k}) < {scope.k} ? ({k}) : 0)" if guarded else k
                        read = f"({u32})qd_xs[{self._x_index(cfg, scope, row, safe)}]"
                        cond = conds + ([f"({k}) < {scope.k}"] if guarded else [])
                        halves.append(f"(({' && '.join(cond)}) ? {read} : 0u)" if cond else read)
                    lines.append(f"qd_x{buf}[{base + i}] = {halves[0]} | ({halves[1]} << 16);")
            if cfg.scales_per == "step":
                lines += self._scales(cfg, d, self._k_row(f"qd_kb + {u * cfg.step_k}", scope, guarded), u, buf)
        if cfg.scales_per == "block":
            lines += self._scales(cfg, d, self._k_row("qd_kb", scope, guarded), 0, buf)
        return lines

    @staticmethod
    def _k_row(k: str, scope, guarded: bool) -> str:
        """Row ``k`` of the range, clamped to its last row where ``guarded`` (a block past the range
        must not read scales past the last group)."""
        return f"(({k}) < {scope.k} ? ({k}) : {scope.k} - 1)" if guarded else f"({k})"

    def _scales(self, cfg: DecodeConfig, d: Dialect, k: str, slot: int, buf: str = "") -> list[str]:
        """Statements: the scales (and zeros) of the lane's columns for row ``k``'s group into slot
        ``slot`` (4 per 16-byte load): ``qd_s`` / ``qd_z`` as float32 (the scale, 2^23 + the zero),
        or for the pair FMAs ``qd_s2`` / ``qd_z2`` (the scale, -(bias + zero) in both halves)."""
        lines = []
        for h in range(cfg.loads):
            for c in range(4):
                i = (slot * cfg.loads + h) * 4 + c
                names = (f"qd_s2{buf}[{i}]", f"qd_z2{buf}[{i}]") if cfg.fast_pairs else (f"qd_s{buf}[{i}]",
                                                                                         f"qd_z{buf}[{i}]")
                lines.append(scale_statements(cfg.weights, d, cfg.kind, cfg.fast_pairs, k, f"qd_scol{h} + {c}",
                                              *names))
        return lines

    def _products(self, cfg: DecodeConfig, d: Dialect, scope, buf: str = "") -> list[str]:
        """Statements: every tile product of the block, the A words dequantized from ``qd_w`` (of
        register buffer ``buf``; scales loaded once for the whole range have no buffer)."""
        w = cfg.weights
        sbuf = "" if cfg.scales_per == "once" else buf
        lines = []
        for u in range(cfg.unroll):
            slot = u if cfg.scales_per == "step" else 0
            for s in range(cfg.k_steps):
                for i in range(cfg.tiles):
                    h, pair = i // 2, 2 * (i % 2)
                    words = []
                    for reg in range(4):       # a0: row g, slots 2t..; a1: row g + 8; a2, a3: slots 2t + 8..
                        half, second = reg % 2, reg // 2
                        c = pair + half
                        word = f"qd_w{buf}[{(u * cfg.loads + h) * 4 + c}]"
                        si = (slot * cfg.loads + h) * 4 + c
                        j = 4 * s + 2 * second
                        words.append(fragment_word(w, d, cfg.kind, cfg.fast_pairs, word, j, f"qd_s2{sbuf}[{si}]",
                                                   f"qd_z2{sbuf}[{si}]", f"qd_s{sbuf}[{si}]", f"qd_z{sbuf}[{si}]"))
                    lines.append(f"qd_a[0] = {words[0]}; qd_a[1] = {words[1]}; qd_a[2] = {words[2]}; "
                                 f"qd_a[3] = {words[3]};")
                    for j in range(cfg.m_tiles):
                        xb = (u * cfg.m_tiles + j) * (cfg.per_word // 2) + 2 * s
                        lines.append(f"qd_b[0] = qd_x{buf}[{xb}]; qd_b[1] = qd_x{buf}[{xb + 1}];")
                        acc = f"qd_acc + {(i * cfg.m_tiles + j) * 4}"
                        mma = d.plane_mma(cfg.kind, acc, "qd_a", "qd_b", "qd_scratch + qd_plane * "
                                          f"{cfg.scratch}" if cfg.scratch else "")
                        # A tile of rows past M (a masked group's count, a short group) is all zeros:
                        # skipped (one test for the whole cube: every lane takes the same branch). Not
                        # around the emulated product, whose barrier PoCL hung on inside the branch.
                        skip = j and cfg.check_m and d.plane_mma_native
                        lines.append(f"if ({scope.m0} + {8 * j} < {scope.m}) {{ {mma} }}" if skip else mma)
        return lines

    def body(self, cfg: DecodeConfig, d: Dialect, scope) -> str:
        w, p = cfg.weights, cfg.per_word
        u32, ushort = d.c_type("u32"), d.c_type("bf16_bits")
        accs = cfg.tiles * cfg.m_tiles * 4
        slots = (cfg.unroll if cfg.scales_per == "step" else 1) * cfg.loads * 4
        listener = self.chain()
        lines = [
            *self.kernel_start(listener),
            f"const int qd_lane = UNIT_ID % {PLANE};",
            f"const int qd_plane = {d.plane_uniform(f'UNIT_ID / {PLANE}')};",
            "const int qd_g = qd_lane >> 2, qd_t = qd_lane & 3;",
            # x's elements as their 16 bits (both 16-bit types travel as bits into the fragments).
            f"const GLOBAL {ushort}* qd_xs = (const GLOBAL {ushort}*)({scope.lhs.ptr});",
            f"const i64 qd_kwords = ({scope.k} + {p - 1}) / {p};",
            f"const i64 qd_blocks = ({scope.k} + {cfg.block_k - 1}) / {cfg.block_k};",
            f"const i64 qd_full = {scope.k} / {cfg.block_k};",
            *self._columns(cfg, scope),
            f"float qd_acc[{accs}];",
            f"for (int qd_i = 0; qd_i < {accs}; ++qd_i) qd_acc[qd_i] = 0.0f;",
            f"{u32} qd_a[4];",
            f"{u32} qd_b[2];",
        ]
        for buf in ("", "n") if cfg.prefetch else ("",):
            lines += [f"{u32} qd_w{buf}[{cfg.unroll * cfg.loads * 4}];",
                      f"{u32} qd_x{buf}[{cfg.unroll * cfg.m_tiles * (p // 2)}];"]
            if buf and cfg.scales_per == "once":
                continue
            names = (f"qd_s2{buf}", f"qd_z2{buf}") if cfg.fast_pairs else (f"qd_s{buf}", f"qd_z{buf}")
            lines += scale_registers(w, d, cfg.fast_pairs, *names, slots)
        if cfg.scales_per == "once":
            lines += self._scales(cfg, d, "0", 0)
        share = 1 if cfg.along_n else cfg.planes    # planes splitting the K range
        lines.append(f"const i64 qd_rounds = (qd_blocks + {share - 1}) / {share};")
        lines += self._rounds(cfg, d, scope, share) if cfg.prefetch else [
            "for (i64 qd_r = 0; qd_r < qd_rounds; ++qd_r) {",
            self._block_loads(cfg, d, scope, share, "qd_r", ""),
            *self._products(cfg, d, scope),
            "}",
        ]
        lines += self._reduce(cfg, d, scope, listener)
        return "\n".join(lines)

    def _block_loads(self, cfg: DecodeConfig, d: Dialect, scope, share: int, round_: str, buf: str) -> str:
        """A block: the loads of this plane's block of round ``round_`` into register buffer ``buf``
        (the guarded path for a block past the whole ones)."""
        fast = "\n    ".join(self._loads(cfg, d, scope, guarded=False, buf=buf))
        tail = "\n    ".join(self._loads(cfg, d, scope, guarded=True, buf=buf))
        return "\n".join([
            "{",
            f"const i64 qd_blk = ({round_}) * {share}" + ("" if cfg.along_n else " + qd_plane") + ";",
            f"const i64 qd_kb = qd_blk * {cfg.block_k};",
            f"if (qd_blk < qd_full) {{\n    {fast}\n}} else {{\n    {tail}\n}}",
            "}"])

    def _rounds(self, cfg: DecodeConfig, d: Dialect, scope, share: int) -> list[str]:
        """The rounds with the next block's loads in flight while this one multiplies: two register
        buffers taking turns (two rounds a trip, so that every register name is fixed). The
        conditions are the same for every plane of the cube (an emulated product's barriers)."""
        return [
            f"if (qd_rounds > 0) {self._block_loads(cfg, d, scope, share, '0', '')}",
            "for (i64 qd_r = 0; qd_r < qd_rounds; qd_r += 2) {",
            f"if (qd_r + 1 < qd_rounds) {self._block_loads(cfg, d, scope, share, 'qd_r + 1', 'n')}",
            *self._products(cfg, d, scope, ""),
            "if (qd_r + 1 < qd_rounds) {",
            f"if (qd_r + 2 < qd_rounds) {self._block_loads(cfg, d, scope, share, 'qd_r + 2', '')}",
            *self._products(cfg, d, scope, "n"),
            "}",
            "}"]

    def _reduce(self, cfg: DecodeConfig, d: Dialect, scope, listener) -> list[str]:
        """The planes' partial sums through shared memory, each output added in plane order by one
        unit (deterministic) and stored through the epilogue."""
        sm, sn = cfg.stage.stage_m, cfg.stage.stage_n
        if cfg.along_n:
            # Each plane holds whole sums of its own columns: stored straight from its registers.
            lines = [*self.before_store(listener)]
            for i in range(cfg.tiles):
                for j in range(cfg.m_tiles):
                    for e in range(4):
                        row = f"{8 * j} + 2 * qd_t + {e & 1}"
                        col = f"qd_plane * {cfg.plane_columns} + {self.column(cfg, i, e >> 1)}"
                        lines.append(self.store(cfg, d, scope, row, col, f"qd_acc[{(i * cfg.m_tiles + j) * 4 + e}]"))
            return lines
        lines = []
        for i in range(cfg.tiles):
            for j in range(cfg.m_tiles):
                for e in range(4):
                    row = f"{8 * j} + 2 * qd_t + {e & 1}"
                    col = self.column(cfg, i, e >> 1)
                    lines.append(f"qd_reduce[(qd_plane * {sm} + {row}) * {sn} + {col}] = "
                                 f"qd_acc[{(i * cfg.m_tiles + j) * 4 + e}];")
        total = sm * sn
        units = cfg.stage.units
        store = self.store(cfg, d, scope, "qd_row", "qd_col", "qd_sum")
        return lines + [
            "SYNC_CUBE();",
            *self.before_store(listener),
            f"for (int qd_o = UNIT_ID; qd_o < {total}; qd_o += {units}) {{",
            f"const int qd_row = qd_o / {sn}, qd_col = qd_o % {sn};",
            "float qd_sum = qd_reduce[qd_o];",
            f"for (int qd_p = 1; qd_p < {cfg.planes}; ++qd_p) qd_sum += qd_reduce[qd_p * {total} + qd_o];",
            store,
            "}",
        ]
