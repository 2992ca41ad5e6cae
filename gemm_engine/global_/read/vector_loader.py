"""Vector loader: each task moves one aligned vector (``float4``, ``double2``: 16 bytes) of an
operand's stage tile from global into shared memory, with no branch around its read.

Same interface and task structure as `CyclicLoader` (so double buffering still spreads the tasks
through its listener, and load-only units can run them): the units take consecutive vectors in
turn, walking the operand's contiguous axis fastest, so a plane's 16-byte reads are consecutive
(coalesced, a quarter as many load instructions as scalar reads). The vector is stored whole when
shared memory is contiguous along the same axis (a row-major rhs, a column-major lhs), else as its
components (the transposing store of a row-major lhs into the k-major stage).

The width is the operand's alignment (`OperandTile.vector_align`: one element where a grouped
problem's groups start anywhere along its contiguous axis), capped by the ``vector_width`` knob and narrowed to divide the
problem's extent along the contiguous axis (so that a vector is wholly inside or wholly outside the
problem), narrowed again until it divides the tile's contiguous extent and the shared-memory row. An operand the loader converts (half precision to
float32), or one with no alignment, is read one element per task (width 1), as the cyclic loader
does but branch-free too.

Bounds (rendered only on the axes the problem does not divide): the read index is clamped into the
problem and the value replaced by zero outside it. A loader that branches around each read keeps
the compiler from issuing the next task's read before this task's store, so every task pays the
whole global-memory latency (measured on the H100: double buffering at 4093^3 ran at 0.22 x cuBLAS
with the cyclic loader's guarded reads).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...problem import Layout
from ...compose.selection import Knob
from .loaders import CyclicLoader, LoaderConfig, OperandTile
from ...dtypes import WORD_BYTES

#: Element words that have vector types of the same name in both backends (float4, double2).
_VECTOR_WORDS = ("f32", "f64")
_COMPONENTS = "xyzw"


@dataclass(frozen=True)
class VectorLoaderConfig(LoaderConfig):
    width: int = 1        # elements per read

    @property
    def read_width(self) -> int:
        return self.width


class VectorLoader(CyclicLoader):
    name = "vector"
    knobs = (Knob("vector_width", 1, "most elements per global read (the operand's alignment narrows it; "
                                     "1 keeps scalar reads)"),)

    @staticmethod
    def width(op: OperandTile, cap: int) -> int:
        """Elements per vector this loader reads for ``op`` with the knob at ``cap`` (1: the cyclic
        loader's scalar path)."""
        word = op.smem_type_word
        if op.converts or word not in _VECTOR_WORDS:
            return 1
        # The problem's alignment, capped, narrowed to divide the problem's contiguous extent.
        w = max(1, min(cap, op.vector_align))
        while w > 1 and op.extent % w:
            w //= 2
        contiguous = op.cols if op.layout is Layout.ROW else op.rows
        v = 1
        while v * 2 <= min(w, 16 // WORD_BYTES[word]):
            v *= 2
        # Every vector must start on a vector boundary of the tile and of the shared-memory row.
        while v > 1 and (contiguous % v or op.smem_ld % v):
            v //= 2
        return v

    def setup(self, operand: OperandTile, units: int, selection=None) -> VectorLoaderConfig:
        super().setup(operand, units)   # validates the unit count
        width = self.width(operand, selection.vector_width if selection is not None else 1)
        vectors = operand.rows * operand.cols // width
        return VectorLoaderConfig(operand=operand, units=units, tasks=-(-vectors // units), width=width)

    def tasks(self, cfg, d, src, smem, row0, col0, rows_bound, cols_bound, unit="UNIT_ID"):
        op = cfg.operand
        w = cfg.width
        word = op.smem_type_word
        row_major = op.layout is Layout.ROW
        per_line = (op.cols if row_major else op.rows) // w
        total = op.rows * op.cols // w
        # Clamp the read into the problem (a vector never straddles a bound: `width`'s contract),
        # then select zero where the vector is outside: no branch around the load, so the compiler
        # can issue every task's load before the first store (a branch per task serializes them).
        last_r = f"{rows_bound} - {w if not row_major else 1}"
        last_c = f"{cols_bound} - {w if row_major else 1}"
        safe_r = f"(gr < {rows_bound} ? gr : {last_r})" if op.check_rows else "gr"
        safe_c = f"(gc < {cols_bound} ? gc : {last_c})" if op.check_cols else "gc"
        conds = ([f"gr < {rows_bound}"] if op.check_rows else []) + ([f"gc < {cols_bound}"] if op.check_cols else [])
        index = op.global_index(safe_r, safe_c, src.ld)
        ctype = d.c_type(word)
        zero = f"({ctype}){d.zero(op.element) if op.converts else '0'}"
        if w == 1:
            value = d.load_global(op.element, src.ptr, index) if op.converts else f"{src.ptr}[{index}]"
            read = [f"{ctype} v = ({ctype})({value});"]
            if conds:
                read.append(f"v = ({' && '.join(conds)}) ? v : {zero};")
            components = ["v"]
        else:
            read = [f"{ctype}{w} v = {d.vector_ref('global', word, w, f'{src.ptr} + {index}', const=True)};"]
            components = [f"v.{_COMPONENTS[j]}" for j in range(w)]
            if conds:
                read += [f"const bool inside = {' && '.join(conds)};"]
                read += [f"{v} = inside ? {v} : {zero};" for v in components]
        local = [("r", f"c + {j}") if row_major else (f"r + {j}", "c") for j in range(w)]
        if w > 1 and op.k_along_rows == row_major:
            # Shared memory contiguous along the global contiguous axis: one vector store.
            store = [f"{d.vector_ref('local', word, w, f'{smem} + {op.smem_index(*local[0])}')} = v;"]
        else:
            store = [f"{smem}[{op.smem_index(r, c)}] = {v};" for v, (r, c) in zip(components, local)]
        out = []
        for t in range(cfg.tasks):
            lines = [f"const int idx = {unit} + {t * cfg.units};"]
            if row_major:
                lines += [f"const int r = idx / {per_line};", f"const int c = (idx % {per_line}) * {w};"]
            else:
                lines += [f"const int r = (idx % {per_line}) * {w};", f"const int c = idx / {per_line};"]
            lines += [f"const i64 gr = {row0} + r;", f"const i64 gc = {col0} + c;", *read, *store]
            body = "\n    ".join(lines)
            partial = (t + 1) * cfg.units > total
            out.append(f"if ({unit} + {t * cfg.units} < {total}) {{\n    {body}\n}}" if partial
                       else f"{{\n    {body}\n}}")
        return out
