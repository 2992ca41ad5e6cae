"""Row copies of an operand into a pitched workspace, in the operand's own layout: ``rows`` runs of
``length`` contiguous elements per batch entry, read at the operand's leading dimension and
written ``pitch`` elements apart (batch/k_major.py's copies that need no transpose: a K-major
source re-pitched for TMA's 16 bytes, or any source whose rows are not whole 128-byte lines).

A cube copies a tile of `ROWS` rows x `LANES` vectors, each vector as wide as the source's
alignment allows (16 bytes for an aligned 16-bit operand, down to one element); each unit one
vector of `VECTORS` of those rows, all loaded before the first is stored; a row's last vector,
where the row is not a whole number of them, element by element. The tile's place comes from the
cube index once (no division per element: one per element made a scalar copy instruction-bound).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..dtypes import ElementType

#: A cube's tile: this many vectors along a row (a 16-byte vector each: 1 KiB of a row) ...
LANES = 64
#: ... of this many rows, each unit one vector of every `UNITS` / `LANES`-th row of them.
VECTORS = 4
UNITS = 256
ROWS = UNITS // LANES * VECTORS


def copy_width(element: ElementType, align: int) -> int:
    """Elements per copy of an operand aligned to ``align`` elements (address, leading dimension
    and batch stride: `MatmulProblem.lhs_align`): the widest 4-, 8- or 16-byte word it allows, else 1."""
    size = min(16, align * element.itemsize)
    return size // element.itemsize if size >= 4 else 1


def cubes(batch: int, rows: int, length: int, width: int) -> int:
    """The grid: a cube per tile of every batch entry (a broadcast operand's later entries return)."""
    return max(1, batch * -(-rows // ROWS) * -(-length // (width * LANES)))


def bits_type(d: Dialect, itemsize: int) -> str:
    """An unsigned type of ``itemsize`` bytes: elements are copied as bits (OpenCL cannot assign a
    ``half`` without cl_khr_fp16)."""
    wide = "ulong" if d.backend == "opencl" else "unsigned long long"
    return {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: wide}[itemsize]


def body(d: Dialect, element: ElementType, width: int, src: str, ld: str, batch_stride: str, dst: str,
         rows: str, length: str, pitch: str, entries: str) -> list[str]:
    """The kernel's statements (C expressions: ``src`` / ``dst`` pointers to the first entry's
    element 0 as `bits_type` words, ``ld`` / ``batch_stride`` the source's, ``pitch`` the copy's,
    ``entries`` the batch entries to copy; a copy's entries are ``rows * pitch`` apart)."""
    t = bits_type(d, element.itemsize)
    count = width * element.itemsize // 4

    def ref(base: str, offset: str, const: bool) -> str:
        """Lvalue: the word (a 4-, 8- or 16-byte vector of floats' bits, or one element) at ``base + offset``."""
        if count == 0:
            return f"{base}[{offset}]"
        if count == 1:
            return f"(*({'const ' if const else ''}GLOBAL {d.c_type('f32')}*)({base} + {offset}))"
        return d.vector_ref("global", "f32", count, f"{base} + {offset}", const=const)
    held = t if count == 0 else d.c_type("f32") + (str(count) if count > 1 else "")
    lines = [
        f"const i64 cp_vectors = ({length} + {width - 1}) / {width};   /* a row's; its last may be partial */",
        f"const i64 cp_blocks = (cp_vectors + {LANES - 1}) / {LANES}, cp_bands = ({rows} + {ROWS - 1}) / {ROWS};",
        "const i64 cp_b = CUBE_ID / (cp_bands * cp_blocks);",
        f"if (cp_b >= {entries}) return;   /* a broadcast operand: its one entry */",
        f"const i64 cp_v = (CUBE_ID % cp_blocks) * {LANES} + UNIT_ID % {LANES};",
        f"const i64 cp_r = ((CUBE_ID / cp_blocks) % cp_bands) * {ROWS} + UNIT_ID / {LANES};",
        f"const bool cp_whole = (cp_v + 1) * {width} <= {length};",
        f"const GLOBAL {t}* cp_src = {src} + cp_b * ({batch_stride}) + cp_v * {width};",
        f"GLOBAL {t}* cp_dst = {dst} + cp_b * ({rows}) * ({pitch}) + cp_v * {width};",
    ]
    step = UNITS // LANES
    loads, stores = [], []
    for j in range(VECTORS):
        row = f"cp_r + {j * step}"
        loads.append(f"{held} cp_x{j}; if (cp_whole && {row} < {rows}) "
                     f"cp_x{j} = {ref('cp_src', f'({row}) * ({ld})', True)};")
        tail = (f" else if ({row} < {rows}) for (i64 e = 0; cp_v * {width} + e < {length}; ++e) "
                f"cp_dst[({row}) * ({pitch}) + e] = cp_src[({row}) * ({ld}) + e];") if width > 1 else ""
        stores.append(f"if (cp_whole && {row} < {rows}) {ref('cp_dst', f'({row}) * ({pitch})', False)} = cp_x{j};{tail}")
    return lines + loads + stores
