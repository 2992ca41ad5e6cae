"""PTX intrinsics of the decode kernels' dequantization (global_/quantized_decode.py): packed codes
to pairs of 16-bit values in one 32-bit register, ready for mma.sync's A fragments, in as few
instructions as the codes allow (the decode kernels are bound by the instructions they issue
a weight byte: bench/SELECTION_NOTES.md, "Quantized decode"). Builders as in ptx.py: each
returns ``(name, definition)``, the name encoding every constant of the text.
"""
from __future__ import annotations

from .ptx import inline_function as _fn


def dequant_pair(kind: str) -> tuple[str, str]:
    """Two int4 codes to their 16-bit values: ``q`` holds ``bias + code`` in each ``kind`` half
    (the code's bits or'ed into the mantissa of 1024.0 (f16) / 128.0 (bf16)), ``nz2`` ``-(bias +
    zero)`` and ``s2`` the scale in both halves: ``(q - (bias + zero))`` is exact, times the scale
    rounded once to nearest even (``+ -0.0`` keeps a zero product's sign): two ``fma.rn.{kind}x2``."""
    one = {"f16": "0x3c003c00u", "bf16": "0x3f803f80u"}[kind]
    return _fn(f"ptx_dequant_pair_{kind}", "unsigned q, unsigned s2, unsigned nz2",
               "    unsigned d;\n" + _pair_fmas(kind, one), ret="unsigned")


def dequant_masked_pair(kind: str, mask: int, magic: int) -> tuple[str, str]:
    """`dequant_pair` of ``(w & mask) | magic`` (the codes already shifted into place in ``w``): one
    ``lop3`` with both constants in registers (written in C, the AND and the OR each take an
    instruction with an immediate: one more per pair)."""
    one = {"f16": "0x3c003c00u", "bf16": "0x3f803f80u"}[kind]
    return _fn(f"ptx_dequant_pair_{kind}_m{mask:08x}_{magic:08x}", "unsigned w, unsigned s2, unsigned nz2",
               "    unsigned q, d;\n"
               f'    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(q) : "r"(w), "r"({mask:#010x}u), "r"({magic:#010x}u));\n'
               + _pair_fmas(kind, one), ret="unsigned")


def _times_scale(kind: str) -> str:
    """The statement every pair helper ends with: ``d`` times the scale pair ``s2``, rounded once
    (``+ -0.0`` keeps a zero product's sign)."""
    return f'    asm("fma.rn.{kind}x2 %0, %1, %2, %3;" : "=r"(d) : "r"(d), "r"(s2), "r"(0x80008000u));\n'


def _pair_fmas(kind: str, one: str) -> str:
    """The two pair FMAs of `dequant_pair` (``q`` in, ``d`` out, then returned)."""
    return (f'    asm("fma.rn.{kind}x2 %0, %1, %2, %3;" : "=r"(d) : "r"(q), "r"({one}), "r"(nz2));\n'
            + _times_scale(kind) + "    return d;")


#: 2^120 (bf16) and 2^8 (f16) in both halves: an e4m3 code's bits placed in a ``kind`` half
#: (`dequant_fp8_pair`) read as its value over this.
FP8_UNDO = {"bf16": ("0x7b807b80u", 4), "f16": ("0x5c005c00u", 7)}


def dequant_fp8_pair(kind: str) -> tuple[str, str]:
    """Two e4m3 codes of ``w`` (its bytes picked by ``sel``, ``__byte_perm`` with zeros: code j to
    byte 0, code j + 1 to byte 2) to their ``kind`` values times the scale ``s2`` (both halves),
    rounded once. Each code's exponent and mantissa go under the half's exponent field, its sign to
    the half's: the half then reads as the code's value times 2^-120 (bf16) / 2^-8 (f16), normal
    and subnormal codes alike (one exponent offset for both), and one exact pair product by
    `FP8_UNDO` restores it (subnormal halves included: the 16-bit pair FMAs keep subnormals)."""
    undo, shift = FP8_UNDO[kind]
    return _fn(f"ptx_dequant_fp8_pair_{kind}", "unsigned w, unsigned sel, unsigned s2",
               "    const unsigned t = __byte_perm(w, 0u, sel);\n"
               f"    unsigned d = ((t & 0x007f007fu) << {shift}) | ((t & 0x00800080u) << 8);\n"
               f'    asm("fma.rn.{kind}x2 %0, %1, %2, %3;" : "=r"(d) : "r"(d), "r"({undo}), "r"(0x80008000u));\n'
               + _times_scale(kind) + "    return d;", ret="unsigned")


def dequant_int8_pair_bf16() -> tuple[str, str]:
    """Two int8 codes of ``w`` (bytes ``sel_lo``, ``sel_hi``: ``__byte_perm`` selectors that put the
    code in byte 0 under 2^23's upper bytes) to bf16 ``(code - zero) * scale``, rounded once: each
    code reads as the float 2^23 + code, plus ``nz`` (the float bits of -(2^23 + zero)) is the whole
    number code - zero exactly, whose upper 16 bits are its bf16 exactly (|code - zero| < 2^8); the
    pair times ``s2`` (the scale in both halves)."""
    return _fn("ptx_dequant_int8_pair_bf16", "unsigned w, unsigned sel_lo, unsigned sel_hi, unsigned s2, unsigned nz",
               "    const float lo = __uint_as_float(__byte_perm(w, 0x4b000000u, sel_lo)) + __uint_as_float(nz);\n"
               "    const float hi = __uint_as_float(__byte_perm(w, 0x4b000000u, sel_hi)) + __uint_as_float(nz);\n"
               "    unsigned d = __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632u);\n"
               + _times_scale("bf16") + "    return d;", ret="unsigned")
