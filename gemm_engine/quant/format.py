"""The format of quantized weights as a kernel reads them: part of the `MatmulProblem` (so of the
compile key), checked by setup, rendered into the kernel's parameters and dequantizing expressions.

Weights are stored as unsigned *codes*, several to a 32-bit word along K (``per_word``: 8 int4
codes, 4 int8 or fp8 codes), each column of the (K, N) weight its own run of words:

* ``k_packed`` (GPTQ's layout): word ``(kw, n)`` at ``kw * ld + n`` holds rows ``kw * per_word ..``
  of column n, row ``kw * per_word + j`` in bits ``[bits * j, bits * (j + 1))``;
* ``prepacked`` (`QuantizedWeight.prepack`): the same words in strips of 64 columns, each strip's
  word rows contiguous (word ``(kw, n)`` at ``(n / 64) * strip + kw * 64 + n % 64``, the word rows
  padded to a multiple of 4, so that a plane's 16-byte reads of four word rows are one 1 KiB run),
  and inside a word the codes of rows 2p and 2p + 1 are ``per_word / 2`` positions apart (rows
  0, 2, 4, 6, 1, 3, 5, 7 for int4), so that one shift and one mask put a pair in two 16-bit halves.

A code's value is ``(code - zero) * scale`` (int4, int8) or ``fp8(code) * scale`` (fp8 e4m3), with
one scale (and zero) per ``group_size`` rows of K per column (``group_size = 0``: one per column);
zeros are an array of the scales' 16-bit type (``zeros=True``: asymmetric) or the format's
implicit zero (8 for int4, 128 for int8: symmetric). Scales and zeros are (groups, N) arrays with
leading dimension ``qscale_ld`` / ``qzero_ld``, passed as the kernel parameters `params` names.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.signature import array, index
from ..dtypes import BFLOAT16, FLOAT8_E4M3, FLOAT16, ElementType

#: kind -> (bits per code, implicit zero of the symmetric form)
KINDS = {"int4": (4, 8), "int8": (8, 128), "fp8_e4m3": (8, 0)}
LAYOUTS = ("k_packed", "prepacked")
#: Scale (and zero) storage words -> their element types.
SCALE_TYPES = {"f16_bits": FLOAT16, "bf16_bits": BFLOAT16}
#: Columns per strip and word-row multiple of the prepacked layout.
STRIP_COLUMNS, STRIP_ROWS = 64, 4


@dataclass(frozen=True)
class WeightFormat:
    """How a quantized weight is stored (the module docstring): the code ``kind``, rows of K per
    scale, whether there are zero points, the scales' 16-bit type and the words' layout."""

    kind: str                   # "int4", "int8", "fp8_e4m3"
    group_size: int = 0         # rows of K per scale; 0: one scale per output column
    zeros: bool = False         # an array of zero points (asymmetric), else the implicit zero
    scale: str = "f16_bits"     # storage word of the scales and zeros: "f16_bits" or "bf16_bits"
    layout: str = "k_packed"    # "k_packed" or "prepacked" (module docstring)
    #: The product reads the (K, N) weight transposed, as an (N, K) ``b`` (``W.T``: a backward's
    #: ``gy @ W^T``; `TransposedQuantizedWeight`): only the dequantizing pass does
    #: (batch/dequantize_first.py).
    transposed: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"WeightFormat.kind: expected one of {sorted(KINDS)}, got {self.kind!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"WeightFormat.layout: expected one of {LAYOUTS}, got {self.layout!r}")
        if self.scale not in SCALE_TYPES:
            raise ValueError(f"WeightFormat.scale: expected one of {sorted(SCALE_TYPES)}, got {self.scale!r}")
        if not isinstance(self.group_size, int) or self.group_size < 0 or (
                self.group_size and self.group_size % self.per_word):
            raise ValueError(f"WeightFormat.group_size={self.group_size!r}: 0 (per column) or a positive multiple "
                             f"of the {self.per_word} {self.kind} codes packed per 32-bit word along K")
        if self.zeros and self.kind == "fp8_e4m3":
            raise ValueError("WeightFormat: fp8 weights have no zero points")

    # -- what a code is -----------------------------------------------------------------------
    @property
    def bits(self) -> int:
        return KINDS[self.kind][0]

    @property
    def per_word(self) -> int:
        """Codes per 32-bit word (consecutive rows of K of one column)."""
        return 32 // self.bits

    @property
    def mask(self) -> int:
        return (1 << self.bits) - 1

    @property
    def implicit_zero(self) -> int:
        """The zero point of the symmetric form (no zeros array)."""
        return KINDS[self.kind][1]

    @property
    def scale_type(self) -> ElementType:
        return SCALE_TYPES[self.scale]

    @property
    def element_types(self) -> tuple[ElementType, ...]:
        """The element types a kernel converts (for the dialect's preamble helpers)."""
        return (self.scale_type,) + ((FLOAT8_E4M3,) if self.kind == "fp8_e4m3" else ())

    def groups(self, k: int) -> int:
        """Rows of the scales (and zeros) array for K rows."""
        return -(-k // self.group_size) if self.group_size else 1

    def position(self, j: int) -> int:
        """Which code slot of a word holds its row ``j`` (the layout's order inside a word)."""
        if self.layout == "prepacked":
            half = self.per_word // 2
            return j // 2 + (j % 2) * half
        return j

    def shift(self, j: int) -> int:
        """Bit offset of row ``j`` of a word."""
        return self.bits * self.position(j)

    # -- kernel parameters and pointers ---------------------------------------------------------
    def params(self) -> tuple:
        """The parameters a batch level appends for the scales (and zeros), after the rhs operand
        (which holds the packed words)."""
        out = [array("qscale_base", self.scale), *index("qscale_offset", "qscale_ld")]
        if self.zeros:
            out += [array("qzero_base", self.scale), *index("qzero_offset", "qzero_ld")]
        return tuple(out)

    def group_params(self) -> tuple:
        """The parameters a grouped level appends besides `params`: how far one expert's scales
        (and zeros) are from the next's (`QuantizedExperts`)."""
        return tuple(index(*(f"{name}_batch_stride" for name in ("qscale", "qzero")[:1 + self.zeros])))

    def pointers(self, d, group: str | None = None) -> list[str]:
        """Statements defining ``qscale`` (and ``qzero``): the arrays at their first element, or
        at the first of expert ``group`` (an expression; `group_params`' strides)."""
        t = d.c_type(self.scale)
        out = []
        for name in ("qscale", "qzero")[:1 + self.zeros]:
            moved = f" + {group} * {name}_batch_stride" if group is not None else ""
            out.append(f"const GLOBAL {t}* RESTRICT {name} = {name}_base + {name}_offset{moved};")
        return out

    def strip(self, k: str) -> str:
        """Expression: words per strip of the prepacked layout for K rows ``k`` (the full K)."""
        rows = STRIP_ROWS * self.per_word
        return f"((({k}) + {rows - 1}) / {rows}) * {STRIP_ROWS * STRIP_COLUMNS}"

    def word_index(self, kw: str, col: str, ld: str, k: str = "K") -> str:
        """Expression: the element offset of word row ``kw`` of column ``col`` (``ld``: the rhs
        leading dimension, ``k``: the problem's whole K, which sizes a prepacked strip)."""
        if self.layout == "prepacked":
            return (f"(({col}) >> 6) * {self.strip(k)} + ({kw}) * {ld} + (({col}) & 63)")
        return f"({kw}) * {ld} + ({col})"

    def k_offset(self, k_begin: str, ld: str) -> str:
        """Expression: how far the packed words move for a K range starting at row ``k_begin`` (a
        multiple of `per_word`)."""
        return f"({k_begin}) / {self.per_word} * {ld}"

    def group_row(self, k: str) -> str:
        """Expression: the scales' row of K row ``k``."""
        return f"({k}) / {self.group_size}" if self.group_size else "0"

    def scale_value(self, d, k: str, col: str) -> str:
        """Expression: the float32 scale of K row ``k`` (relative to the pointers) of column ``col``."""
        return d.load_global(self.scale_type, "qscale", f"{self.group_row(k)} * qscale_ld + ({col})")

    def zero_value(self, d, k: str, col: str) -> str:
        """Expression: the float32 zero point of row ``k`` of column ``col``."""
        if self.zeros:
            return d.load_global(self.scale_type, "qzero", f"{self.group_row(k)} * qzero_ld + ({col})")
        return d.literal(self.implicit_zero, "f32")

    def biased_zero(self, zero: str) -> str:
        """Expression: what `value` subtracts for zero point ``zero``: ``2^23 + zero`` (exact: zero
        points are whole numbers below 2^16), so that the code, read as ``2^23 + code`` by putting
        its bits into a float's mantissa (no integer conversion instruction), minus it is exact."""
        return f"(8388608.0f + {zero})"

    def value(self, d, word: str, j: int, scale: str, biased_zero: str) -> str:
        """Expression: the float32 value of row ``j`` of the 32-bit ``word`` (``biased_zero``:
        `biased_zero`'s; exact: a code minus a whole zero point, or an fp8 value, times a 16-bit
        scale fits float32's 24 bits)."""
        code = f"((({word}) >> {self.shift(j)}) & {self.mask}u)"
        if self.kind == "fp8_e4m3":
            # e4m3's exponent and mantissa bits placed in a float's with the exponent rebiased
            # (+120): exact for normal codes; a subnormal code m (exponent 0) reads 2^-7 + m 2^-10,
            # whose value is m 2^-9 = 2 (that - 2^-7), two exact selects. No float subnormal is
            # ever made (CUDA's flush-to-zero turned the smallest codes, m 2^-129, into 0: the
            # H100 run of tests/batch/test_dequantize_first.py). e4m3fn's NaN codes, which quantize
            # never makes, read as 480.
            m = f"(({code}) & 0x7fu)"
            sub = f"({m} < 8u)"
            mag = (f"((UINT_AS_FLOAT(({m} << 20) + 0x3c000000u) - ({sub} ? 0.0078125f : 0.0f))"
                   f" * ({sub} ? 2.0f : 1.0f))")
            return f"(((({code}) & 0x80u) ? -{mag} : {mag}) * {scale})"
        return f"(UINT_AS_FLOAT(0x4b000000u | {code}) - {biased_zero}) * {scale}"

    def pair_shift(self, j: int) -> int | None:
        """The shift that puts the codes of rows ``j`` and ``j + 1`` at the bottom of a word's two
        16-bit halves, where one shift does (the prepacked layout), else None."""
        a, b = self.shift(j), self.shift(j + 1)
        return a if b - a == 16 else None

    def pair_bits(self, word: str, j: int) -> str:
        """Expression: the int4 codes of rows ``j`` and ``j + 1`` of ``word`` in the low 4 bits of
        a 32-bit word's two 16-bit halves (row j low). One shift and mask in the prepacked layout."""
        a, b = self.shift(j), self.shift(j + 1)
        low = f"((({word}) >> {a}) & 0xfu)"
        if b - a == 16:
            return f"((({word}) >> {a}) & 0x000f000fu)"
        high = f"(({word}) << {16 - b})" if b <= 16 else f"(({word}) >> {b - 16})"
        return f"({low} | ({high} & 0x000f0000u))"


__all__ = ["KINDS", "LAYOUTS", "SCALE_TYPES", "STRIP_COLUMNS", "STRIP_ROWS", "WeightFormat"]
