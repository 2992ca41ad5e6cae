"""Dequantizing loader: a task loader of quantized rhs weights into the stage's k-major shared memory.

The rhs stage tile (``stage_k`` rows of K by ``stage_n`` columns) of a quantized problem is read as
its packed 32-bit words (gemm_engine/quant/format.py: ``per_word`` consecutive rows of one column in
each): every task moves one word, the units taking consecutive columns in turn (a plane's reads
are consecutive words: coalesced), reads the column's scale (and zero) for the word's group, and
writes the word's ``per_word`` values into ``smem[row][col]`` as the stage's element word: float32
for register tiles (exact), 16-bit bits for tensor-core tiles (each value rounded once, to nearest
even). So every stage that reads k-major shared memory (unit and plane stages, register and
mma.sync tiles) runs quantized weights unchanged, on every backend.

Bounds, rendered only on the axes the problem does not divide: a column past N reads the last
column and stores zeros; rows past K store zeros (a word's codes past K are padding, and ``(0 -
zero) * scale`` is not zero). The stage's K extent must be a multiple of ``per_word``.
"""
from __future__ import annotations

from ...compose.capabilities import K_MAJOR_SMEM, QUANTIZED_WEIGHTS, TASK_LOADER
from ...dtypes import BFLOAT16, FLOAT16, FLOAT32
from ...errors import SetupError
from .loaders import Loader, LoaderConfig, OperandTile

#: The element type a shared-memory word stores (the conversion `Dialect.store_global` renders).
_SMEM_TYPES = {"f32": FLOAT32, "f16_bits": FLOAT16, "bf16_bits": BFLOAT16}


class DequantizingLoader(Loader):
    name = "dequantizing"
    provides = frozenset({TASK_LOADER, K_MAJOR_SMEM, QUANTIZED_WEIGHTS})

    def setup(self, operand: OperandTile, units: int, selection=None) -> LoaderConfig:
        w = operand.weights
        if w is None:
            raise SetupError(self.name, f"reads quantized weights; the {operand.ident} operand is dense")
        if operand.ident != "rhs" or not operand.k_along_rows:
            raise SetupError(self.name, "dequantizes the rhs (K x N weights) only")
        if operand.smem_type_word not in _SMEM_TYPES:
            raise SetupError(self.name, f"writes float32 or 16-bit shared memory; the stage holds "
                                        f"{operand.smem_type_word}")
        if units < 1:
            raise SetupError(self.name, "needs at least one unit")
        if operand.rows % w.per_word:
            raise SetupError(self.name, f"stage_k={operand.rows} is not a multiple of the {w.per_word} {w.kind} "
                                        f"codes of a packed word")
        words = operand.rows // w.per_word * operand.cols
        return LoaderConfig(operand=operand, units=units, tasks=-(-words // units))

    def tasks(self, cfg, d, src, smem, row0, col0, rows_bound, cols_bound, unit="UNIT_ID"):
        op = cfg.operand
        w = op.weights
        p = w.per_word
        cols = op.cols
        total = op.rows // p * cols
        smem_et = _SMEM_TYPES[op.smem_type_word]
        # A column past N reads the last column (valid memory; its values are replaced by zeros).
        col = f"(gc < {cols_bound} ? gc : {cols_bound} - 1)" if op.check_cols else "gc"
        # The word row past the last one (K not a multiple of the stage) reads the last word row.
        words_k = f"(({rows_bound}) + {p - 1}) / {p}"
        kw = f"(gr / {p} < {words_k} ? gr / {p} : {words_k} - 1)" if op.check_rows else f"gr / {p}"
        lines_common = [
            f"const {d.c_type('u32')} word = {src.ptr}[{w.word_index(kw, col, src.ld)}];",
            f"const float scale = {w.scale_value(d, 'gr', col)};",
            f"const float zero = {w.biased_zero(w.zero_value(d, 'gr', col))};" if w.kind != "fp8_e4m3" else "",
        ]
        out = []
        for t in range(cfg.tasks):
            lines = [f"const int idx = {unit} + {t * cfg.units};",
                     f"const int r = (idx / {cols}) * {p};", f"const int c = idx % {cols};",
                     f"const i64 gr = {row0} + r;", f"const i64 gc = {col0} + c;",
                     *filter(None, lines_common)]
            for j in range(p):
                value = w.value(d, "word", j, "scale", "zero")
                conds = ([f"gr + {j} < {rows_bound}"] if op.check_rows else []) + \
                        ([f"gc < {cols_bound}"] if op.check_cols else [])
                if conds:
                    value = f"({' && '.join(conds)}) ? {value} : 0.0f"
                lines.append(d.store_global(smem_et, smem, op.smem_index(f"r + {j}", "c"), value))
            body = "\n    ".join(lines)
            partial = (t + 1) * cfg.units > total
            out.append(f"if ({unit} + {t * cfg.units} < {total}) {{\n    {body}\n}}" if partial
                       else f"{{\n    {body}\n}}")
        return out
