"""Global reads of the skinny global level (global_/skinny.py), one vector load at a time: the
statements that read ``width`` elements of an operand into registers and the expressions of each
element in the compute type. A level that reads packed weights (a dequantizing read) provides the
same two lists from its own load."""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..dtypes import WORD_BYTES, ElementType

COMPONENTS = "xyzw"


def read_global(d: Dialect, et: ElementType, ident: str, index: str, width: int,
                name: str) -> tuple[list[str], list[str]]:
    """(statements, expressions): ``width`` consecutive elements of global array ``ident`` from
    element ``index`` (aligned to the whole vector), read by one load into register ``name``, and
    each element as its compute type."""
    if width == 1:
        return [f"const {d.compute_type(et)} {name} = {d.load_global(et, ident, index)};"], [name]
    word = "f64" if et.storage == "f64" else "f32"
    count = width * et.itemsize // WORD_BYTES[word]
    vector = d.stream_vector(word, count, f"{ident} + {index}")   # each element is read once
    statements = [f"const {d.c_type(word)}{count} {name} = {vector};"]
    if et.storage in ("f32", "f64"):
        return statements, [f"{name}.{COMPONENTS[j]}" for j in range(width)]
    # 16-bit elements, two per 32-bit word, the first in the low half (every device the engine
    # runs on is little-endian).
    elements = []
    for j in range(width):
        bits = f"FLOAT_AS_UINT({name}.{COMPONENTS[j // 2]})"
        if et.storage == "bf16_bits":
            # A bfloat16 is the high half of a float32: shift the low element up, mask the high one.
            elements.append(f"UINT_AS_FLOAT({bits} << 16)" if j % 2 == 0
                            else f"UINT_AS_FLOAT({bits} & 0xffff0000u)")
        else:
            # float16: the dialect's conversion reads a 16-bit storage element through a pointer;
            # point it at a private copy of the bits (bfloat16's storage word: 16 unsigned bits).
            u16, h = d.c_type("bf16_bits"), f"{name}_h{j}"
            statements.append(f"const {u16} {h} = ({u16})({bits} {'& 0xffffu' if j % 2 == 0 else '>> 16'});")
            elements.append(d.load_global(et, f"((const {d.storage_type(et)}*)&{h})", "0"))
    return statements, elements


def clamped(index: str, extent: str, last: str, check: bool) -> str:
    """Expression: ``index``, or ``last`` where it is past ``extent`` (only when ``check``)."""
    return f"{index} < {extent} ? {index} : {last}" if check else index
