"""Swizzled chunk loader: 16-byte chunks of one operand into the 128-byte-swizzled layout wgmma reads.

CUDA only (``cp.async``). The operand's stage is a set of *lines* (global rows of a row-major
operand, columns of a column-major one), each cut into 16-byte chunks of 8 contiguous 16-bit
elements (4 for tf32, 16 for int8). `SwizzledOperandLayout` (tile/wgmma.py) says where a chunk goes: line
``l``, chunk ``c`` lands at ``(c >> 3) * atom_stride + l * 128 + (((c & 7) ^ (l & 7)) << 4)``
bytes into the stage (K-major: a line is an m or n row of stage_k k, c >> 3 its 128-byte k-atom;
MN-major: a line is a k row of the whole m or n extent, c >> 3 its 64-wide atom). Unit u moves chunk ``u % chunks_per_line`` of lines
``u / chunks_per_line + t * step`` (t < tasks), so one warp reads whole global lines (coalesced)
and all of a unit's chunks share one source pointer and one shared offset plus constants.

How a chunk moves depends on the operand's alignment (`OperandTile.vector_align`: the widest vector,
in elements, dividing its address, leading dimension and batch stride), as in `ChunkLoader`: a whole chunk -> one
``cp.async.cg`` of 16 bytes; less -> 2 or 4 ``cp.async.ca`` of 8 or 4 bytes into the same (swizzled,
still contiguous) 16-byte chunk; under 4 bytes (16-bit elements aligned to 1, int8 to 1 or 2) -> the
register path: ``issue`` reads the elements into registers, ``commit``
(run after the stage issued its asynchronous wgmma batch) stores them with one 16-byte store.

Edges: the line axis is all-or-nothing, the contiguous axis a count ``n`` of valid elements;
``cp.async`` with a smaller source size zero-fills the rest, a chunk with nothing valid reads the
operand's base pointer (always valid) with source size 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...codegen.dialect import Dialect
from ...errors import SetupError
from ...problem import Layout
from ...tile.wgmma import STORAGE_BYTES, SWIZZLE_BYTES, SwizzledOperandLayout
from ...tile.swizzle import ChunkSwizzle
from ...compose.capabilities import SWIZZLED_CHUNK_LOADER, SWIZZLED_SMEM
from .async_loader import (ChunkLines, advance_source, cp_async_pieces, register_loads, store_staged,
                           valid_count)
from .loaders import Loader, LoaderConfig, OperandTile


#: One 128-byte run of a line: its 8 chunks permuted by the line's low 3 bits.
_RUN = ChunkSwizzle(SWIZZLE_BYTES)


@dataclass(frozen=True)
class SwizzledOperandTile(ChunkLines, OperandTile):
    swizzle: SwizzledOperandLayout | None = None


@dataclass(frozen=True)
class SwizzledLoaderConfig(LoaderConfig):
    piece: int = 8                 # elements per copy instruction (under 4 bytes: register path)
    size: int = 2                  # bytes per element

    @property
    def vec(self) -> int:
        """Elements per 16-byte chunk."""
        return 16 // self.size

    @property
    def smem_bytes(self) -> int:
        return self.operand.swizzle.smem_bytes

    @property
    def chunks_per_line(self) -> int:
        return self.operand.contiguous_extent // self.vec

    @property
    def step(self) -> int:
        return self.units // self.chunks_per_line

    @property
    def registers(self) -> bool:
        return self.piece * self.size < 4

    @property
    def read_width(self) -> int:
        return self.piece


class SwizzledChunkLoader(Loader):
    name = "swizzled_chunk_loader"
    provides = frozenset({SWIZZLED_CHUNK_LOADER, SWIZZLED_SMEM})

    def k_contiguous(self, operand_layout: Layout, is_lhs: bool) -> bool:
        return (operand_layout is Layout.ROW) == is_lhs

    def setup(self, operand: OperandTile, units: int, selection=None) -> SwizzledLoaderConfig:
        if not isinstance(operand, SwizzledOperandTile) or operand.swizzle is None:
            raise SetupError(self.name, "needs a SwizzledOperandTile")
        if operand.swizzle.swizzle != SWIZZLE_BYTES:
            raise SetupError(self.name, f"{operand.ident}: writes the 128-byte swizzle only; this stage's "
                                        f"warpgroup tiles (not whole 128-byte rows) take the "
                                        f"{operand.swizzle.swizzle}-byte one (the TMA loader writes it)")
        size = STORAGE_BYTES.get(operand.element.storage)
        if operand.converts or size is None:
            raise SetupError(self.name, f"copies int8, fp8, 16-bit or 32-bit float elements; "
                                        f"got {operand.element.name}")
        vec = 16 // size
        cpl = operand.contiguous_extent // vec
        if operand.contiguous_extent % vec or units % cpl:
            raise SetupError(self.name, f"{operand.ident}: {units} units do not tile lines of "
                                        f"{operand.contiguous_extent} elements")
        total = operand.lines * cpl
        if total % units:
            raise SetupError(self.name, f"{operand.ident}: {total} chunks do not split over {units} units")
        return SwizzledLoaderConfig(operand=operand, units=units, tasks=total // units,
                                    piece=min(vec, max(1, operand.vector_align)), size=size)

    def declare(self, cfg: SwizzledLoaderConfig, d: Dialect, src, row0: str, col0: str, unit: str = "UNIT_ID") -> str:
        """Loop-invariant state: this unit's source pointer (moved by `advance`), its first shared
        offset inside a stage (swizzle included) and, on the register path, staging registers.
        ``unit``: this unit's index among the loader's (the cube's unit index where all copy)."""
        op, p, cpl = cfg.operand, cfg.operand.ident + "_sw", cfg.chunks_per_line
        cc = f"{p}_cc * {cfg.vec}"
        r, c = (f"{p}_line0", cc) if op.layout is Layout.ROW else (cc, f"{p}_line0")
        ctype = d.c_type(op.smem_type_word)
        lines = [f"const int {p}_line0 = {unit} / {cpl};",      # a name or the parenthesized UNIT_ID
                 f"const int {p}_cc = {unit} % {cpl};",
                 f"const GLOBAL {ctype}* {p}_src = {src.ptr} + {op.global_index(f'{row0} + {r}', f'{col0} + {c}', src.ld)};",
                 f"const unsigned {p}_dst = {self._offset(cfg, f'{p}_line0')};"]
        if cfg.registers:
            lines.append(f"unsigned {p}_stage[{cfg.tasks * 4}];")
        return "\n".join(lines)

    def _offset(self, cfg: SwizzledLoaderConfig, line: str) -> str:
        # Within a 128-byte run: the chunk swizzle the plane stage's swizzled rows use too.
        p, atom = cfg.operand.ident + "_sw", cfg.operand.swizzle.atom_stride
        run = _RUN.byte_offset(line, f"({p}_cc) & 7")
        return f"(unsigned)(({p}_cc >> 3) * {atom} + {run})"

    def _dst(self, cfg: SwizzledLoaderConfig, t: int) -> str:
        """Shared offset (inside a stage) of task t's chunk: a constant step when the line step
        keeps the swizzle row (a multiple of 8 lines), else recomputed."""
        p = cfg.operand.ident + "_sw"
        if (t * cfg.step) % 8 == 0:
            return f"{p}_dst + {t * cfg.step * SWIZZLE_BYTES}"
        return self._offset(cfg, f"{p}_line0 + {t * cfg.step}")

    def _valid(self, cfg: SwizzledLoaderConfig, t: int, bounds: dict) -> str | None:
        op, p = cfg.operand, cfg.operand.ident + "_sw"
        conds, rem = [], None
        for axis, check in (("rows", op.check_rows), ("cols", op.check_cols)):
            if not check:
                continue
            start, bound = bounds[axis]
            if axis == op.line_axis:
                conds.append(f"({start}) + {p}_line0 + {t * cfg.step} < {bound}")
            else:
                rem = f"({bound}) - ({start}) - {p}_cc * {cfg.vec}"
        return valid_count(conds, rem, cfg.vec)

    def issue(self, cfg: SwizzledLoaderConfig, d: Dialect, src, stage_base: str, row0: str, col0: str,
              rows_bound: str, cols_bound: str) -> str:
        """Start moving this unit's chunks of the slice whose first global element is (row0, col0)
        (the source pointer already points there) into the stage at shared address ``stage_base``."""
        op, p = cfg.operand, cfg.operand.ident + "_sw"
        bounds = {"rows": (row0, rows_bound), "cols": (col0, cols_bound)}
        out = []
        for t in range(cfg.tasks):
            valid = self._valid(cfg, t, bounds)
            body = [valid] if valid else []
            at = f"{p}_src + {t * cfg.step} * {src.ld}"
            if cfg.registers:
                body += register_loads(p, t, at, valid is not None, cfg.size)
            else:
                body += self._copies(cfg, d, src, at, f"{stage_base} + {self._dst(cfg, t)}", valid is not None)
            out.append("{\n" + "\n".join(body) + "\n}")
        return "\n".join(out)

    def _copies(self, cfg, d, src, at, dst, checked) -> list[str]:
        lines = [f"const GLOBAL char* gsrc = (const GLOBAL char*)({at});"]
        if checked:
            lines.append(f"if (n <= 0) gsrc = (const GLOBAL char*){src.ptr};")
        return lines + cp_async_pieces(d, "gsrc", dst, cfg.vec, cfg.piece, cfg.size, checked)

    def commit(self, cfg: SwizzledLoaderConfig, d: Dialect, stage_base: str) -> str:
        """Register path only: store the staged chunks (one 16-byte shared store each)."""
        if not cfg.registers:
            return ""
        p = cfg.operand.ident + "_sw"
        out = []
        for t in range(cfg.tasks):
            out.append(store_staged(d, p, t, f"{stage_base} + {self._dst(cfg, t)}"))
        return "\n".join(out)

    def advance(self, cfg: SwizzledLoaderConfig, src, stage_k: int) -> str:
        return advance_source(cfg.operand, cfg.operand.ident + "_sw", src, stage_k)
