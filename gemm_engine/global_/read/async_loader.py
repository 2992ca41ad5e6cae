"""Chunk loader: 16-byte chunks of one operand into shared memory, asynchronously where it can.

``cp.async`` is sm_80+ PTX: CUDA, or NVIDIA's OpenCL driver where the probe found it. Shared memory holds the operand in its global layout (the
stage's ``smem_layout="global"``: a row-major lhs or rhs is stored with its columns contiguous, a
column-major one with its rows contiguous), so a chunk of ``vec = 16 / element size`` consecutive
elements of one global row (or column) is 16 consecutive bytes in shared memory too. Every unit
moves ``tasks`` chunks per K slice; the chunks of one unit differ by a whole number of lines, so one
global pointer and one shared address per operand, plus compile-time offsets, address them all
(the index math is done once, before the K loop).

How a chunk moves depends on the operand's alignment (`OperandTile.vector_align`: the widest vector,
in elements, that divides its address, leading dimension and batch stride; one element where a
grouped problem's groups start anywhere along its contiguous axis):

* ``align == vec``: one ``cp.async.cg`` of 16 bytes;
* ``align * size >= 4``: ``vec / align`` ``cp.async.ca`` of ``align`` elements each (4 or 8 bytes);
* else (half precision or int8 on an odd leading dimension): the register path. ``issue`` reads the chunk
  element by element into registers, ``commit`` (run by the global matmul after the compute that
  hides those loads) packs and stores it into shared memory with one 16-byte store.

Swizzled rows (`ChunkOperandTile.swizzle`, set where the stage asks for ``smem_swizzle``): the
lines are unpadded and chunk c of line l lands at chunk ``c ^ phase(l)`` (tile/swizzle.py, the code
the tile reads with); a task whose first line is a multiple of 8 lines (the swizzle's period) from
the unit's first keeps its offset plus a constant, any other gets its own (loop-invariant) address.

Edges: a chunk's valid element count ``n`` (0..vec) comes from the bounds of the axes the problem
does not divide; ``cp.async`` with a source size of ``n`` elements zero-fills the rest of its 16
bytes, the register path selects zero. A chunk with nothing valid reads from the operand's base
pointer (always valid) with source size 0, so no address outside the operand is ever formed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...codegen.dialect import Dialect
from ...errors import SetupError
from ...problem import Layout
from ...compose.capabilities import CHUNK_LOADER, GLOBAL_LAYOUT_SMEM, XOR_SWIZZLED_SMEM
from ...tile.swizzle import ChunkSwizzle
from .loaders import Loader, LoaderConfig, OperandTile
from ...dtypes import WORD_BYTES


class ChunkLines:
    """Mixin of the operand tiles chunk loaders move: the tile as *lines* (global rows of a
    row-major operand, columns of a column-major one) of ``contiguous_extent`` elements."""

    @property
    def line_axis(self) -> str:
        return "rows" if self.layout is Layout.ROW else "cols"

    @property
    def contiguous_extent(self) -> int:
        return self.cols if self.layout is Layout.ROW else self.rows

    @property
    def lines(self) -> int:
        return self.rows if self.layout is Layout.ROW else self.cols

    @property
    def k_contiguous(self) -> bool:
        """Is k the contiguous axis (row-major lhs, column-major rhs)?"""
        return self.k_along_rows == (self.layout is Layout.COL)


@dataclass(frozen=True)
class ChunkOperandTile(ChunkLines, OperandTile):
    """An operand tile stored in shared memory in its global layout (``align``: its vector
    alignment decides the copy width); ``swizzle``: its lines' chunks XOR-swizzled (None: as they lie)."""

    swizzle: ChunkSwizzle | None = None

    def smem_index(self, r: str, c: str) -> str:
        line, elem = (r, c) if self.layout is Layout.ROW else (c, r)
        if self.swizzle is not None:
            return self.swizzle.element(line, elem)
        return f"({line}) * {self.smem_ld} + ({elem})"


@dataclass(frozen=True)
class ChunkLoaderConfig(LoaderConfig):
    vec: int = 8          # elements per 16-byte chunk
    piece: int = 8        # elements per copy instruction; under 4 bytes' worth: register path
    size: int = 2         # bytes per element

    @property
    def registers(self) -> bool:
        return self.piece * self.size < 4

    @property
    def read_width(self) -> int:
        return self.piece

    @property
    def smem_bytes(self) -> int:
        return self.operand.lines * self.operand.smem_ld * self.size

    @property
    def chunks_per_line(self) -> int:
        return self.operand.contiguous_extent // self.vec

    @property
    def line_step(self) -> int:
        """Lines between one unit's consecutive chunks."""
        return self.units // self.chunks_per_line


class ChunkLoader(Loader):
    name = "chunk_loader"
    provides = frozenset({CHUNK_LOADER, GLOBAL_LAYOUT_SMEM, XOR_SWIZZLED_SMEM})

    def k_contiguous(self, operand_layout: Layout, is_lhs: bool) -> bool:
        """Stored as it lies in global memory: k is contiguous for a row-major lhs, a column-major rhs."""
        return (operand_layout is Layout.ROW) == is_lhs

    def setup(self, operand: OperandTile, units: int, selection=None) -> ChunkLoaderConfig:
        if not isinstance(operand, ChunkOperandTile):
            raise SetupError(self.name, "needs a ChunkOperandTile (shared memory in the global layout)")
        if operand.converts:
            raise SetupError(self.name, f"copies bits; {operand.element.name} would need converting to "
                                        f"{operand.smem_type_word}")
        size = WORD_BYTES[operand.smem_type_word]
        vec = 16 // size
        cpl, ext = operand.contiguous_extent // vec, operand.contiguous_extent
        if ext % vec or (operand.smem_ld * size) % 16:
            raise SetupError(self.name, f"{operand.ident}: lines of {ext} elements (ld {operand.smem_ld}) "
                                        f"are not whole 16-byte chunks")
        if units % cpl:
            raise SetupError(self.name, f"{operand.ident}: {units} units do not tile lines of {cpl} chunks")
        sw = operand.swizzle
        if sw is not None and (sw.line_bytes != operand.smem_ld * size or sw.itemsize != size):
            raise SetupError(self.name, f"{operand.ident}: swizzled lines of {sw.line_bytes} bytes, but the stage's "
                                        f"rows are {operand.smem_ld * size} bytes of {size}-byte elements")
        piece = min(vec, max(1, operand.vector_align))
        total = operand.lines * cpl
        return ChunkLoaderConfig(operand=operand, units=units, tasks=-(-total // units), vec=vec,
                                 piece=piece, size=size)

    # -- code pieces the pipelined global matmul assembles --------------------------------------
    def declare(self, cfg: ChunkLoaderConfig, d: Dialect, src, smem: str, row0: str, col0: str,
                unit: str = "UNIT_ID") -> str:
        """Loop-invariant state: this unit's first line and offset, its source pointer (advanced by
        `advance`), its first shared address and, on the register path, the staging registers."""
        op, p = cfg.operand, op_prefix(cfg)
        line0, off0 = f"({unit}) / {cfg.chunks_per_line}", f"(({unit}) % {cfg.chunks_per_line}) * {cfg.vec}"
        r, c = (f"{p}_line0", f"{p}_off0") if op.layout is Layout.ROW else (f"{p}_off0", f"{p}_line0")
        ctype = d.c_type(op.smem_type_word)
        lines = [f"const int {p}_line0 = {line0};", f"const int {p}_off0 = {off0};",
                 f"const GLOBAL {ctype}* {p}_src = {src.ptr} + {op.global_index(f'{row0} + {r}', f'{col0} + {c}', src.ld)};",
                 f"const unsigned {p}_dst = {d.shared_address('&' + smem + '[' + op.smem_index(r, c) + ']')};"]
        for t in self._own_address_tasks(cfg):
            line = f"{p}_line0 + {t * cfg.line_step}"
            rt, ct = (line, f"{p}_off0") if op.layout is Layout.ROW else (f"{p}_off0", line)
            lines.append(f"const unsigned {p}_dst{t} = {d.shared_address('&' + smem + '[' + op.smem_index(rt, ct) + ']')};")
        if cfg.registers:
            lines.append(f"unsigned {p}_stage[{cfg.tasks * 4}];")
        return "\n".join(lines)

    @staticmethod
    def _own_address_tasks(cfg: ChunkLoaderConfig) -> list[int]:
        """Tasks whose swizzled offset is not the first task's plus a constant (their first line is
        not a whole number of swizzle periods on)."""
        sw = cfg.operand.swizzle
        return [] if sw is None else [t for t in range(cfg.tasks) if (t * cfg.line_step) % sw.period]

    def _task_dst(self, cfg: ChunkLoaderConfig, t: int, slot: str) -> str:
        """Shared address of task t's chunk in stage ``slot``."""
        p = op_prefix(cfg)
        slot_bytes = f"({slot}) * {cfg.smem_bytes}"
        if t in self._own_address_tasks(cfg):
            return f"{p}_dst{t} + {slot_bytes}"
        return f"{p}_dst + {slot_bytes} + {t * cfg.line_step * cfg.operand.smem_ld * cfg.size}"

    def _valid(self, cfg: ChunkLoaderConfig, t: int, bounds: dict) -> str | None:
        """Statement declaring ``n``, the elements of chunk t inside the problem (None: always all)."""
        op, p = cfg.operand, op_prefix(cfg)
        line = f"{p}_line0 + {t * cfg.line_step}"
        conds, rem = [], None
        if cfg.tasks * cfg.units > op.lines * cfg.chunks_per_line and t == cfg.tasks - 1:
            conds.append(f"{line} < {op.lines}")           # this unit has no last chunk
        for axis, check in (("rows", op.check_rows), ("cols", op.check_cols)):
            if not check:
                continue
            start, bound = bounds[axis]
            if (axis == "cols") == (op.layout is Layout.ROW):   # the contiguous axis: a count
                rem = f"({bound}) - ({start}) - {p}_off0"
            else:                                               # a line axis: all or nothing
                conds.append(f"({start}) + {line} < {bound}")
        return valid_count(conds, rem, cfg.vec)

    def issue(self, cfg: ChunkLoaderConfig, d: Dialect, src, slot: str, row0: str, col0: str,
              rows_bound: str, cols_bound: str) -> str:
        """Start moving this unit's chunks of the slice at (row0, col0) (global coordinates of the
        stage tile's first element; the source pointer already points there) into stage ``slot``."""
        p = op_prefix(cfg)
        bounds = {"rows": (row0, rows_bound), "cols": (col0, cols_bound)}
        out = []
        for t in range(cfg.tasks):
            at = f"{p}_src + {t * cfg.line_step} * {src.ld}"
            dst = self._task_dst(cfg, t, slot)
            valid = self._valid(cfg, t, bounds)
            body = [valid] if valid else []
            if cfg.registers:
                body += register_loads(op_prefix(cfg), t, at, valid is not None, cfg.size)
            else:
                body += self._async_copies(cfg, d, at, dst, valid is not None, src.ptr)
            out.append("{\n" + "\n".join(body) + "\n}")
        return "\n".join(out)

    def _async_copies(self, cfg, d, src, dst, checked, base) -> list[str]:
        piece_bytes, lines = cfg.piece * cfg.size, []
        lines.append(f"const GLOBAL void* gsrc = {src};")
        if checked:   # never form an address outside the operand: nothing valid reads the base
            lines.append(f"if (n <= 0) gsrc = {base};")
        return lines + cp_async_pieces(d, "(const GLOBAL char*)gsrc", dst, cfg.vec, cfg.piece, cfg.size, checked)

    def commit(self, cfg: ChunkLoaderConfig, d: Dialect, slot: str) -> str:
        """Register path only: store the staged chunks into stage ``slot`` (one 16-byte store each)."""
        if not cfg.registers:
            return ""
        p, op = op_prefix(cfg), cfg.operand
        out = []
        for t in range(cfg.tasks):
            store = store_staged(d, p, t, self._task_dst(cfg, t, slot))
            if cfg.tasks * cfg.units > op.lines * cfg.chunks_per_line and t == cfg.tasks - 1:
                store = f"if ({p}_line0 + {t * cfg.line_step} < {op.lines}) {store}"
            out.append(store)
        return "\n".join(out)

    def advance(self, cfg: ChunkLoaderConfig, src, stage_k: int) -> str:
        """Move the source pointer to the next K slice."""
        return advance_source(cfg.operand, op_prefix(cfg), src, stage_k)


def cp_async_pieces(d: Dialect, src: str, dst: str, chunk: int, piece: int, size: int, checked: bool) -> list[str]:
    """``cp.async`` copies of one ``chunk``-element chunk in ``piece``-element pieces of ``size``-byte
    elements, from the byte pointer expression ``src`` to the shared address ``dst``. Checked: only
    the first ``n`` elements are read (the rest of each piece zero-filled by the src-size operand),
    and a piece with nothing valid reads from ``src`` itself with size 0."""
    piece_bytes = piece * size
    cache = "cg" if piece_bytes == 16 else "ca"   # .cg takes 16-byte copies only
    lines = []
    for i in range(chunk // piece):
        off = i * piece
        if checked:
            sizes = f"min(max(n - {off}, 0), {piece}) * {size}"
            sptr = f"(n > {off} ? {src} + {off * size} : {src})"
            lines.append(d.cp_async(cache, piece_bytes, f"{dst} + {off * size}", sptr, sizes))
        else:
            lines.append(d.cp_async(cache, piece_bytes, f"{dst} + {off * size}", f"{src} + {off * size}"))
    return lines


def op_prefix(cfg: ChunkLoaderConfig) -> str:
    return f"{cfg.operand.ident}_ld8"


# -- code both chunk loaders (this one and the swizzled one) render ---------------------------------
def valid_count(conds: list, rem: str | None, vec: int) -> str | None:
    """Statement declaring ``n``, the valid elements of a chunk of ``vec``: none unless every line
    condition of ``conds`` holds, then all, or (``rem``: elements left on the contiguous axis) at
    most ``rem``. None when nothing is checked."""
    if not conds and rem is None:
        return None
    count = str(vec)
    if rem is not None:
        count = f"(rem <= 0 ? 0 : rem >= {vec} ? {vec} : (int)rem)"
    head = f"const i64 rem = {rem}; " if rem is not None else ""
    return head + (f"const int n = ({' && '.join(conds)}) ? {count} : 0;" if conds else f"const int n = {count};")


def register_loads(p: str, t: int, src: str, checked: bool, size: int = 2) -> list[str]:
    """Register path: read task t's 16 bytes of ``size``-byte elements (2: 8 halves, 1: 16 int8)
    at ``src`` one by one (zero past ``n`` when ``checked``) into the 4 staging registers
    ``{p}_stage[4t ..]``, packed lowest element in the lowest bits."""
    word = {1: "unsigned char", 2: "unsigned short"}[size]
    per = 4 // size
    lines = [f"const GLOBAL {word}* gsrc = (const GLOBAL {word}*)({src});"]
    for j in range(4):
        parts = []
        for h in range(per):
            e = per * j + h
            load = f"(unsigned)gsrc[{e}]"
            load = f"(n > {e} ? {load} : 0u)" if checked else load
            parts.append(load if h == 0 else f"({load} << {8 * size * h})")
        lines.append(f"{p}_stage[{t * 4 + j}] = {' | '.join(parts)};")
    return lines


def store_staged(d: Dialect, p: str, t: int, dst: str) -> str:
    """Register path: one 16-byte shared store of task t's staging registers at address ``dst``."""
    return d.st_shared_v4(dst, [f"{p}_stage[{t * 4 + j}]" for j in range(4)])


def advance_source(op: OperandTile, p: str, src, stage_k: int) -> str:
    """Move the source pointer ``{p}_src`` (of the operand at ``src``) to the next K slice."""
    step = str(stage_k) if op.k_contiguous else f"{stage_k} * {src.ld}"
    return f"{p}_src += {step};"
