"""Converting loader: a quantized rhs's packed words brought into each ring slot by the bulk copy
engine, then converted by units of the producer warpgroup into the 16-bit, 128-byte-swizzled
K-major slot that wgmma reads (global_/tma_converting.py runs its two roles).

Why: the dense Hopper kernel (TMA producer, wgmma consumers) runs at cuBLAS's rate; the weights can
be read as their packed bytes (a quarter or half of bf16's) if something turns them into the
slot the consumers read. Here that is the producer warpgroup's idle warps, so the consumers' loop
is the dense kernel's, unchanged, and no 16-bit copy of the weight is ever written to global memory
(dequantize-first writes and reads one: batch/dequantize_first.py).

The weight must be prepacked (quant/format.py): a slot (``stage_k`` = 64 rows of K by ``stage_n``
columns, whole 64-column strips) is then one contiguous run of ``64 / per_word`` word rows of each
strip (2 KiB a strip for int4, 4 for 8-bit codes), so the issuing unit copies it with one
``cp.async.bulk`` a strip, counted on the slot's *packed* mbarrier. Each converting unit takes
whole columns (unit ``u``: columns ``u``, ``u + converters``, ...; consecutive units consecutive
columns, so their 4-byte word reads and 16-byte stores meet no bank conflicts), and for each
16-byte chunk of its column (8 rows of K) reads the words from the packed slot, dequantizes the
four pairs (global_/dequant_words.py, the arithmetic the register-A kernels use) and stores them
where the 128-byte swizzle puts chunk ``kc`` of line ``c``: ``c * 128 + ((kc ^ (c & 7)) << 4)``.
The slot's rows of the scales (and zeros) for its columns come with the words, by bulk copies
too (loaded by the converters from global memory, even a slot ahead, each slot waited for them:
4096 x 4096 x 256 int4 took 66.7 us against cuBLAS's 18.5 on the H100).

Edges: copies read only the strips inside the weight (its columns are padded to whole strips) and
the word rows a strip has (padded to 4); word rows past that are read as zero codes (finite
values, multiplied by x's zeros past K, which TMA fills). Strips past N are not copied: their
columns' products reach only output columns no writer stores. Scales' rows and columns are
clamped into the arrays.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...codegen.dialect import Dialect
from ...compose.capabilities import CONVERTING_LOADER, QUANTIZED_WEIGHTS, SWIZZLED_SMEM
from ...errors import SetupError
from ...problem import Layout
from ...quant.format import STRIP_COLUMNS
from ...tile.wgmma import SWIZZLE_BYTES
from ..dequant_words import fragment_word, scale_registers, scale_statements
from .loaders import Loader, LoaderConfig, OperandTile
from .swizzled_loader import SwizzledOperandTile

#: Rows of K a slot holds: one 128-byte swizzled run of 16-bit values a column.
SLOT_K = 64
_CHUNK = 8                 # 16-bit values a 16-byte chunk
_STRIP_ROW_BYTES = STRIP_COLUMNS * 4
#: Converting units: a producer warpgroup's warps but the issuing one.
CONVERTING_UNITS = 96


def slot_bytes(rows: int, cols: int, w) -> int:
    """Bytes of a slot of ``rows`` x ``cols`` (16-bit values, packed words of format ``w``, scale
    rows), a multiple of 1 KiB: what the selector fits the ring with too."""
    scales = (SLOT_K // w.group_size if 0 < w.group_size < SLOT_K else 1) * (2 if w.zeros else 1)
    raw = rows * cols * 2 + rows * cols * w.bits // 8 + scales * cols * 2
    return -(-raw // 1024) * 1024


@dataclass(frozen=True)
class ConvertingLoaderConfig(LoaderConfig):
    kind: str = "bf16"          # the 16-bit values written ("f16" / "bf16")
    fast: bool = True           # codes dequantized by pairs (dequant_words.fast_pairs)

    @property
    def read_width(self) -> None:
        return None

    @property
    def word_rows(self) -> int:
        return SLOT_K // self.operand.weights.per_word

    @property
    def strips(self) -> int:
        return self.operand.cols // STRIP_COLUMNS

    @property
    def strip_bytes(self) -> int:
        """Bytes of one strip's word rows in a slot."""
        return self.word_rows * _STRIP_ROW_BYTES

    @property
    def values_bytes(self) -> int:
        """The 16-bit slot the stage reads (first in the slot: its swizzle atoms stay 1 KiB-aligned)."""
        return self.operand.swizzle.smem_bytes

    @property
    def scale_offset(self) -> int:
        """Bytes from the packed part's start to the scale rows (then the zero rows)."""
        return self.strips * self.strip_bytes

    @property
    def scale_row_bytes(self) -> int:
        return self.operand.cols * 2

    @property
    def smem_bytes(self) -> int:
        """The slot: the values, the words, the scale (and zero) rows, to whole 1 KiB (the next
        slot's values start on a swizzle atom)."""
        return slot_bytes(self.operand.rows, self.operand.cols, self.operand.weights)

    @property
    def slot_bytes(self) -> int:
        """Bytes the slot's *full* barrier counts: none (its units arrive instead)."""
        return 0

    @property
    def columns(self) -> int:
        """Columns each converting unit takes (the last of them may be past the tile)."""
        return -(-self.operand.cols // self.units)

    @property
    def scale_rows(self) -> int:
        """Scale rows a slot spans: more than one where a group is shorter than the slot."""
        g = self.operand.weights.group_size
        return SLOT_K // g if 0 < g < SLOT_K else 1


class ConvertingLoader(Loader):
    name = "converting_loader"
    provides = frozenset({CONVERTING_LOADER, QUANTIZED_WEIGHTS, SWIZZLED_SMEM})

    def k_contiguous(self, operand_layout: Layout, is_lhs: bool) -> bool:
        return True                 # the values are written K-major, whatever the words' layout

    def setup(self, operand: OperandTile, units: int, selection=None, shared_by: int = 1) -> ConvertingLoaderConfig:
        """``units``: the issuing units (1, as a TMA loader's); the converting ones are the
        producer warpgroup's other `CONVERTING_UNITS`."""
        w = operand.weights
        if w is None or operand.ident != "rhs":
            raise SetupError(self.name, "converts a quantized rhs (gemm_engine.quantize); this operand is dense")
        if w.layout != "prepacked":
            raise SetupError(self.name, "copies whole strips of a prepacked weight (QuantizedWeight.prepack()); "
                                        "this one is k_packed")
        if not isinstance(operand, SwizzledOperandTile) or operand.swizzle is None or operand.swizzle.mn_major:
            raise SetupError(self.name, "writes the K-major 128-byte-swizzled layout (a SwizzledOperandTile)")
        if operand.smem_type_word not in ("f16_bits", "bf16_bits"):
            raise SetupError(self.name, f"writes 16-bit values; the stage holds {operand.smem_type_word}")
        if operand.rows != SLOT_K or operand.cols % STRIP_COLUMNS:
            raise SetupError(self.name, f"a {operand.rows} x {operand.cols} slot: {SLOT_K} rows of K by whole "
                                        f"{STRIP_COLUMNS}-column strips")
        g = w.group_size
        if g and (g % _CHUNK or (g < SLOT_K and SLOT_K % g) or (g > SLOT_K and g % SLOT_K)):
            raise SetupError(self.name, f"group_size={g}: a multiple of {_CHUNK} that divides or is a multiple of "
                                        f"the slot's {SLOT_K} rows of K")
        if shared_by != 1:
            # Measured slower where each cube converted half of every slot and st.async-stored it into
            # its partner's (bench/SELECTION_NOTES.md, "Converted in shared memory"), and not kept.
            raise SetupError(self.name, f"cluster_m={shared_by}: a converted slot is not shared between cubes "
                                        "(cluster_m=1)")
        if units != 1:
            raise SetupError(self.name, f"{units} issuing units: one unit issues a slot's copies")
        # Pairs round once from exact values only where the scales are of the values' own type.
        return ConvertingLoaderConfig(operand=operand, units=CONVERTING_UNITS, tasks=1,
                                      kind=operand.smem_type_word[:-5], fast=w.scale == operand.smem_type_word)

    # -- the issuing unit ---------------------------------------------------------------------------
    def issue(self, cfg: ConvertingLoaderConfig, d: Dialect, scope, slot: str, bar: str, k0: str) -> str:
        """Statements (one unit): the bulk copies of the slot's packed words (rows ``k0`` on of
        tile column ``scope.n0``) into the packed part of slot address ``slot``, their bytes raised
        on ``bar`` first."""
        w, op = cfg.operand.weights, cfg.operand
        strip = w.strip(scope.k)
        lines = [f"const i64 cv_kw = ({k0}) / {w.per_word};",
                 # The strip's word rows (padded to 4) left from cv_kw: the copy's rows.
                 f"const i64 cv_left = {strip} / {STRIP_COLUMNS} - cv_kw;",
                 f"const unsigned cv_rows = cv_left < {cfg.word_rows} ? (unsigned)cv_left : {cfg.word_rows}u;",
                 f"const i64 cv_strip0 = ({scope.n0}) / {STRIP_COLUMNS};"]
        if op.check_cols:
            lines.append(f"const i64 cv_in = ({scope.n} + {STRIP_COLUMNS - 1}) / {STRIP_COLUMNS} - cv_strip0;")
            lines.append(f"const unsigned cv_strips = cv_in < {cfg.strips} ? (unsigned)cv_in : {cfg.strips}u;")
        else:
            lines.append(f"const unsigned cv_strips = {cfg.strips}u;")
        # Scale rows: the tile's columns up to the row's end (its pitch is whole 16 bytes).
        arrays = [("qscale", "qscale_ld")] + ([("qzero", "qzero_ld")] if w.zeros else [])
        for name, ld in arrays:
            lines.append(f"const unsigned cv_{name}_bytes = 2u * (unsigned)({ld} - ({scope.n0}) < {op.cols} ? "
                         f"{ld} - ({scope.n0}) : {op.cols});")
        total = " + ".join([f"cv_strips * cv_rows * {_STRIP_ROW_BYTES}u"]
                           + [f"{cfg.scale_rows}u * cv_{name}_bytes" for name, _ in arrays])
        lines.append(d.mbarrier_arrive_expect_tx(bar, total))
        for a, (name, ld) in enumerate(arrays):
            for q in range(cfg.scale_rows):
                k = f"({k0}) + {q * w.group_size}" if cfg.scale_rows > 1 else f"({k0})"
                row = w.group_row(f"({k} < {scope.k} ? {k} : {scope.k} - 1)")
                dst = cfg.values_bytes + cfg.scale_offset + (a * cfg.scale_rows + q) * cfg.scale_row_bytes
                lines.append(d.bulk_load(f"{slot} + {dst}u", f"{name} + ({row}) * {ld} + ({scope.n0})",
                                         f"cv_{name}_bytes", bar))
        for j in range(cfg.strips):
            src = f"{scope.rhs.ptr} + (cv_strip0 + {j}) * {strip} + cv_kw * {STRIP_COLUMNS}"
            copy = d.bulk_load(f"{slot} + {cfg.values_bytes + j * cfg.strip_bytes}u", src,
                               f"cv_rows * {_STRIP_ROW_BYTES}u", bar)
            lines.append(f"if ({j}u < cv_strips) {copy}" if op.check_cols else copy)
        return "{\n" + "\n".join(lines) + "\n}"

    # -- the converting units -----------------------------------------------------------------------
    def declare(self, cfg: ConvertingLoaderConfig, d: Dialect, unit: str) -> list[str]:
        """Declarations of a converting unit (``unit``: its index among them)."""
        w, n = cfg.operand.weights, cfg.columns * cfg.scale_rows
        return [f"const int cv_unit = {unit};", *scale_registers(w, d, cfg.fast, "cv_s", "cv_z", n)]

    def convert(self, cfg: ConvertingLoaderConfig, d: Dialect, scope, slot: str, packed: str, k0: str) -> list[str]:
        """Statements: the unit's columns of the slot at shared address ``slot`` converted from its
        packed words and scale rows (``packed``: a generic byte pointer to them)."""
        w, op = cfg.operand.weights, cfg.operand
        raw = d.c_type(w.scale)
        lines = [f"const {raw}* cv_sc = (const {raw}*)({packed} + {cfg.scale_offset});"]
        for t in range(cfg.columns):
            for q in range(cfg.scale_rows):
                i, at = t * cfg.scale_rows + q, f"{q * op.cols} + cv_unit + {t * cfg.units}"
                zero_at = f"{(cfg.scale_rows + q) * op.cols} + cv_unit + {t * cfg.units}"
                if (t + 1) * cfg.units > op.cols:         # a column past the tile reads column 0's
                    at, zero_at = (f"(cv_unit + {t * cfg.units} < {op.cols} ? {x} : 0)" for x in (at, zero_at))
                values = (d.load_global(w.scale_type, "cv_sc", at),
                          d.load_global(w.scale_type, "cv_sc", zero_at) if w.zeros else None)
                lines.append(scale_statements(w, d, cfg.kind, cfg.fast, "", "", f"cv_s[{i}]", f"cv_z[{i}]", values))
        if op.check_rows:       # word rows past the strip's: zero codes (module docstring)
            strip = w.strip(scope.k)
            lines.append(f"const i64 cv_valid = {strip} / {STRIP_COLUMNS} - ({k0}) / {w.per_word};")
        per_chunk = _CHUNK // w.per_word          # words a chunk (1 for int4, 2 for 8-bit codes)
        for t in range(cfg.columns):
            body = [f"const int c = cv_unit + {t * cfg.units};",
                    f"const unsigned* cv_w = (const unsigned*)({packed}) + (c >> 6) * {cfg.strip_bytes // 4} + (c & 63);",
                    f"const unsigned cv_line = {slot} + (unsigned)c * {SWIZZLE_BYTES}u, cv_x = (unsigned)(c & 7);"]
            # Every word of the column read before any store: a store's "memory" clobber keeps later
            # reads after it, so reads between stores would each wait a shared-memory round trip.
            for row in range(cfg.word_rows):
                word = f"cv_w[{row * STRIP_COLUMNS}]"
                body.append(f"const unsigned cv_r{row} = {f'cv_valid > {row} ? {word} : 0u' if op.check_rows else word};")
            for kc in range(SLOT_K // _CHUNK):
                words = [f"cv_r{kc * per_chunk + h}" for h in range(per_chunk)]
                q = (kc * _CHUNK) // w.group_size if 0 < w.group_size < SLOT_K else 0
                i = t * cfg.scale_rows + q
                pairs = [fragment_word(w, d, cfg.kind, cfg.fast, words[(2 * p) // w.per_word], (2 * p) % w.per_word,
                                       f"cv_s[{i}]", f"cv_z[{i}]", f"cv_s[{i}]", f"cv_z[{i}]")
                         for p in range(_CHUNK // 2)]
                body.append(d.st_shared_v4(f"cv_line + (({kc}u ^ cv_x) << 4)", pairs))
            partial = (t + 1) * cfg.units > op.cols
            block = "{\n" + "\n".join(body) + "\n}"
            lines.append(f"if (cv_unit + {t * cfg.units} < {op.cols}) {block}" if partial else block)
        return lines
