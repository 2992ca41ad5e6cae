"""Packed weight words to 16-bit A fragments in registers: the arithmetic the two levels that build
tensor-core A operands from quantized weights share (quantized_decode.py under mma.sync,
quantized_wgmma.py under wgmma's register-A form).

A fragment word holds two 16-bit values of consecutive rows of K of one column. With ``fast``
(`Dialect.supports("dequant_pair")` and scales of the activations' own type) the codes are
converted two at a time (codegen/ptx_dequant.py) from ``s2`` (the scale in both halves) and ``z2``
(`Dialect.dequant_pair_zero`'s); else each value is ``(code - zero) * scale`` in float32 (exact)
from ``s`` and ``z`` (`WeightFormat.biased_zero`'s), packed with one rounding. Both give the values
`QuantizedWeight.dequantize(rounded_to=...)` gives.
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..quant.format import WeightFormat
from .quantized_decode_config import KINDS


def fragment_weights(name: str, problem: MatmulProblem, why: str) -> WeightFormat:
    """The problem's weight format, or SetupError (naming level ``name``) unless the rhs is a
    quantized weight and x is of a 16-bit type the A fragments hold (``why``: the level's reason)."""
    if problem.weights is None:
        raise SetupError(name, "reads quantized weights; this problem's rhs is dense")
    if problem.lhs.name not in KINDS or problem.rhs != problem.lhs:
        raise SetupError(name, f"{problem.lhs.name} activations: {why} (float16, bfloat16)")
    return problem.weights


def fast_pairs(problem: MatmulProblem, dialect: Dialect) -> bool:
    """Whether the codes are dequantized by pairs: the pair FMAs round once from exact values only
    where the scales are of x's own type."""
    return dialect.supports("dequant_pair") and problem.weights.scale_type == problem.lhs


def fragment_word(w: WeightFormat, d: Dialect, kind: str, fast: bool, word: str, j: int,
                  s2: str, z2: str, s: str, z: str) -> str:
    """Expression: the A word of rows ``j`` and ``j + 1`` of the 32-bit ``word`` (row j in the low
    half) as ``kind`` values."""
    if fast and w.bits == 8:
        return d.dequant_pair8(w.kind, kind, word, w.position(j), w.position(j + 1), s2, z2)
    if fast and w.pair_shift(j) is not None:
        return d.dequant_shifted_pair(kind, word, w.pair_shift(j), s2, z2)
    if fast:
        return d.dequant_pair(kind, w.pair_bits(word, j), s2, z2)
    return d.pack16x2(kind, w.value(d, word, j + 1, s, z), w.value(d, word, j, s, z))


def scale_statements(w: WeightFormat, d: Dialect, kind: str, fast: bool, k: str, col: str,
                     scale: str, zero: str, values: tuple[str, str | None] | None = None) -> str:
    """Statement: the scale (and zero) of row ``k``'s group of column ``col`` into the registers
    ``scale`` and ``zero`` in the form `fragment_word` takes (``s2`` / ``z2`` with ``fast``, else
    ``s`` / ``z``); fp8 codes have no zero. ``values``: float32 expressions of the scale and the
    zero (None: the implicit one) to convert instead of loading them (`raw_scale_loads`' registers)."""
    s_value, z_value = values or (w.scale_value(d, k, col), w.zero_value(d, k, col) if w.zeros else None)
    z = z_value if w.zeros else d.literal(w.implicit_zero, "f32")
    keep_zero = w.kind != "fp8_e4m3"
    if fast:
        nz = f" {zero} = {d.dequant_pair_zero(kind, z, w.kind)};" if keep_zero else ""
        return f"{{ const float s = {s_value}; {scale} = {d.pack16x2(kind, 's', 's')};{nz} }}"
    nz = f" {zero} = {w.biased_zero(z)};" if keep_zero else ""
    return f"{scale} = {s_value};{nz}"


def raw_scale_loads(w: WeightFormat, k: str, col: str, scale: str, zero: str) -> str:
    """Statement: the scale (and zero) of row ``k``'s group of column ``col`` as their stored bits
    into the 16-bit registers ``scale`` (and ``zero``): nothing uses them yet, so a warp does not
    wait for the load where it is issued (the conversion, `scale_statements` with ``values``,
    comes later)."""
    row = w.group_row(k)
    out = f"{scale} = qscale[{row} * qscale_ld + ({col})];"
    return out + (f" {zero} = qzero[{row} * qzero_ld + ({col})];" if w.zeros else "")


def scale_registers(w: WeightFormat, d: Dialect, fast: bool, scale: str, zero: str, count: int) -> list[str]:
    """Declarations of ``count`` scale (and zero) registers in `scale_statements`' form."""
    word = d.c_type("u32") if fast else "float"
    return [f"{word} {scale}[{count}];"] + ([f"{word} {zero}[{count}];"] if w.kind != "fp8_e4m3" else [])


__all__ = ["fast_pairs", "fragment_weights", "fragment_word", "raw_scale_loads", "scale_registers", "scale_statements"]
