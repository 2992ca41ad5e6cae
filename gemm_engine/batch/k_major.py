"""K-major batch matmul: the partitioned batch level, for tiles that read operands only K-major.

tf32 wgmma has no transpose bits (tile/wgmma.py): both operands must reach shared memory with k
contiguous, i.e. a row-major lhs and a column-major rhs. Where the tile says so
(`TileMatmul.requires_k_major`) and an operand has the other layout, this level first transposes
that operand into a workspace, then runs the partitioned kernel on the copy:

1. ``gemm_engine_k_major_lhs`` / ``gemm_engine_k_major_rhs`` (only for the operands that need it):
   64 x 64 tiles through shared memory, so that both the reads (along the operand's contiguous
   axis) and the writes (along k) are whole rows. The copy's rows are ``k_pitch`` = K rounded up
   to a 16-byte multiple, so the main kernel's loaders move whole 16-byte chunks; a broadcast
   operand (batch stride 0) is copied once.
2. ``gemm_engine_kernel``: the partitioned kernel reading the copy: its scope gives the copied
   operand's pointer into the workspace and its leading dimension ``k_pitch``.

With ``copy_ragged`` (a knob the selector sets), an operand whose rows are not whole 128-byte
lines (3000 x 3000 half-precision rows of 6000 bytes: each 128-byte piece a tile load reads spans
two lines, twice the L2 requests) is copied too, into rows of a 128-byte pitch, in its own layout
where the tile reads that layout (batch/repitch.py: ``gemm_engine_copy_lhs`` / ``_rhs``); copies
that keep their layout (a K-major source, an MN-major one kept so) are row copies, the others
transposes. Every copy's rows are then whole 128-byte lines.

Every kernel takes the batch level's usual arguments plus the workspace. With nothing to
transpose this level is the partitioned one: one kernel, no workspace. Why a separate pass and
not a transposing loader: ``cp.async`` copies bytes as they lie, so a transposing loader would go
through registers and lose the asynchronous ring; the pass costs one read and one write of the
operand (K x N x 8 bytes for a float32 rhs), small against the GEMM from a few hundred rows of M
on (the heuristic's gate, algorithms/wgmma.py). Measured on the H100: tf32 4096^3 0.450 ms with a
row-major rhs against 0.388 ms with a column-major one (the pass: about 0.06 ms for 128 MiB moved;
bench/results/h100/tf32_layouts.md, notes).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..codegen.dialect import Dialect
from ..compose.selection import Knob
from ..problem import Layout, MatmulProblem
from . import repitch
from .base import BatchConfig, Launch, Workspace
from .partitioned import PartitionedBatchMatmul
from ..codegen.signature import array

_TILE = 64          # transposed tile edge
_ROWS = 4           # unit rows of a transpose cube: 256 units, 16 elements each way (in flight at once)
_UNITS = _TILE * _ROWS


@dataclass(frozen=True)
class KMajorBatchConfig(BatchConfig):
    lhs_copy: bool = field(default=False, kw_only=True)
    rhs_copy: bool = field(default=False, kw_only=True)
    pitch_align: int = field(default=4, kw_only=True)   # elements per 16 bytes (per 128 with copy_ragged)
    #: Operands whose source is K-major already (copied for their alignment: re-pitched, not transposed).
    k_major_sources: tuple[str, ...] = field(default=(), kw_only=True)
    #: Copied operands kept MN-major (rows of K, each M or N long: ``copy_ragged`` on a layout the tile reads).
    mn_major_copies: tuple[str, ...] = field(default=(), kw_only=True)
    #: Elements per load and store of each row copy (batch/repitch.py), by operand.
    copy_widths: tuple[tuple[str, int], ...] = field(default=(), kw_only=True)

    @property
    def copies(self) -> tuple[str, ...]:
        return tuple(name for name, on in (("lhs", self.lhs_copy), ("rhs", self.rhs_copy)) if on)

    @property
    def row_copies(self) -> tuple[str, ...]:
        """Copies in the source's own layout (row copies, batch/repitch.py); the others transpose."""
        return tuple(op for op in self.copies if op in self.k_major_sources or op in self.mn_major_copies)


def k_pitch(k: int, align: int) -> int:
    """Row length (elements) of a copied operand: its rows (K, or M or N kept MN-major) rounded up
    to whole ``align``-element chunks (16 bytes, or 128 with ``copy_ragged``)."""
    return -(-k // align) * align


#: Bytes of the lines a tile's loads read whole where an operand's rows are multiples of them.
LINE_BYTES = 128


def row_bytes(problem: MatmulProblem, op: str) -> int:
    """Bytes of one row of operand ``op`` along its contiguous axis (taken as unpadded)."""
    layout, k_major = (problem.lhs_layout, Layout.ROW) if op == "lhs" else (problem.rhs_layout, Layout.COL)
    extent = problem.k if Layout(layout) is k_major else (problem.m if op == "lhs" else problem.n)
    return extent * (problem.lhs if op == "lhs" else problem.rhs).itemsize


def ragged_operands(problem: MatmulProblem) -> tuple[str, ...]:
    """The operands whose rows are not whole `LINE_BYTES` lines."""
    return tuple(op for op in ("lhs", "rhs") if row_bytes(problem, op) % LINE_BYTES)


class KMajorBatchMatmul(PartitionedBatchMatmul):
    name = "k_major_batch"
    passes_weights = False   # its operand copies and tensor maps know nothing of packed weights
    knobs = PartitionedBatchMatmul.knobs + (
        Knob("copy_ragged", False, "copy an operand whose rows are not whole 128-byte lines into rows that are "
                                   "(one pass over it; the tile's loads then read whole lines)"),)

    def copies_for(self, problem: MatmulProblem) -> tuple[bool, bool]:
        """Whether lhs / rhs must be copied: the ones the tile cannot read in their layout."""
        if not self.global_.requires_k_major(problem):
            return False, False
        return problem.lhs_layout is not Layout.ROW, problem.rhs_layout is not Layout.COL

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        lhs_copy, rhs_copy = self.copies_for(problem)
        ragged = ragged_operands(problem) if selection.copy_ragged else ()
        lhs_copy, rhs_copy = lhs_copy or "lhs" in ragged, rhs_copy or "rhs" in ragged
        if not (lhs_copy or rhs_copy):
            return super().setup(problem, selection, dialect)
        k_major_tile = self.global_.requires_k_major(problem)
        sources = {"lhs": (lhs_copy, Layout(problem.lhs_layout), Layout.ROW, problem.lhs, problem.lhs_align),
                   "rhs": (rhs_copy, Layout(problem.rhs_layout), Layout.COL, problem.rhs, problem.rhs_align)}
        k_sources = tuple(op for op, (copy, layout, k_major, _, _) in sources.items() if copy and layout is k_major)
        # A ragged copy keeps an MN-major layout the tile reads (a row copy, not a transpose).
        kept = tuple(op for op, (copy, layout, k_major, _, _) in sources.items()
                     if copy and layout is not k_major and selection.copy_ragged and not k_major_tile)
        align = (LINE_BYTES if selection.copy_ragged else 16) // problem.lhs.itemsize
        vector = 16 // problem.lhs.itemsize
        inner = replace(problem,
                        lhs_layout=problem.lhs_layout if not lhs_copy or "lhs" in kept else Layout.ROW,
                        rhs_layout=problem.rhs_layout if not rhs_copy or "rhs" in kept else Layout.COL,
                        lhs_align=vector if lhs_copy else problem.lhs_align,
                        rhs_align=vector if rhs_copy else problem.rhs_align)
        base = super().setup(inner, selection, dialect)
        widths = tuple((op, repitch.copy_width(et, a)) for op, (copy, _, _, et, a) in sources.items()
                       if op in k_sources + kept)
        return KMajorBatchConfig(global_=base.global_, dispatch=base.dispatch,
                                 persistent_cubes=base.persistent_cubes, lhs_copy=lhs_copy,
                                 rhs_copy=rhs_copy, pitch_align=align, k_major_sources=k_sources,
                                 mn_major_copies=kept, copy_widths=widths)

    def _copied(self, cfg) -> tuple[str, ...]:
        return cfg.copies if isinstance(cfg, KMajorBatchConfig) else ()

    @staticmethod
    def copy_shape(cfg: KMajorBatchConfig, op: str, m, n, k) -> tuple:
        """(rows, row length) of operand ``op``'s copy per batch entry (values or C names): rows of
        K for a K-major copy, rows of M or N kept MN-major."""
        extent = m if op == "lhs" else n
        return (k, extent) if op in cfg.mn_major_copies else (extent, k)

    def launches(self, cfg: BatchConfig, problem: MatmulProblem) -> list[Launch]:
        return [self.copy_launch(cfg, problem, op) for op in self._copied(cfg)] + super().launches(cfg, problem)

    def copy_launch(self, cfg: KMajorBatchConfig, problem: MatmulProblem, op: str) -> Launch:
        """The launch of the kernel that writes operand ``op``'s copy (`copy_kernel`)."""
        rows, length = self.copy_shape(cfg, op, problem.m, problem.n, problem.k)
        if op in cfg.row_copies:
            width = dict(cfg.copy_widths)[op]
            return Launch(f"gemm_engine_copy_{op}", repitch.cubes(problem.batch, rows, length, width),
                          repitch.UNITS, dynamic_shared=False)
        return Launch(f"gemm_engine_k_major_{op}", problem.batch * -(-length // _TILE) * -(-rows // _TILE),
                      _UNITS, dynamic_shared=False)

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem):
        copied = self._copied(cfg)
        if not copied:
            return None
        count = 0
        for op in copied:
            rows, length = self.copy_shape(cfg, op, problem.m, problem.n, problem.k)
            count += rows * k_pitch(length, cfg.pitch_align)
        return Workspace(problem.lhs, problem.batch * count)

    # -- kernels ---------------------------------------------------------------------------------
    def signature(self, cfg):
        signature = super().signature(cfg)
        if not self._copied(cfg):
            return signature
        return signature.extended(array("workspace", cfg.global_.lhs_loader.operand.element.storage,
                                        writable=True))

    @staticmethod
    def pitch_name(cfg: KMajorBatchConfig, op: str) -> str:
        """The C name of operand ``op``'s copy's row pitch."""
        return f"{op}_pitch" if op in cfg.mn_major_copies else "k_pitch"

    def _entry(self, cfg: KMajorBatchConfig, op: str) -> str:
        """C expression: elements of one batch entry of ``op``'s copy."""
        rows, _ = self.copy_shape(cfg, op, "M", "N", "K")
        return f"{rows} * {self.pitch_name(cfg, op)}"

    def scope(self, cfg, d=None):
        scope = super().scope(cfg, d)
        # The copies are read through their own pointers (`operand_pointer`) with rows of their
        # pitch (a batch level passing tensor maps encodes theirs from the copies).
        copies = {op: replace(scope.operand(op), ptr=op, ld=self.pitch_name(cfg, op)) for op in self._copied(cfg)}
        return replace(scope, **copies)

    def _regions(self, cfg) -> dict[str, str]:
        """Element offset of each copied operand's region in the workspace."""
        return {"lhs": "0", "rhs": f"batch * {self._entry(cfg, 'lhs')}" if cfg.lhs_copy else "0"}

    def _pitch(self, cfg) -> str:
        a = cfg.pitch_align
        kept = "".join(f" const i64 {op}_pitch = ({'M' if op == 'lhs' else 'N'} + {a - 1}) & ~(i64){a - 1};"
                       for op in cfg.mn_major_copies)
        return f"const i64 k_pitch = (K + {a - 1}) & ~(i64){a - 1};{kept}"

    def pointers(self, cfg, d):
        lines = super().pointers(cfg, d)
        return [self._pitch(cfg)] + lines if self._copied(cfg) else lines

    def operand_pointer(self, cfg, d, op):
        if op not in self._copied(cfg):
            return super().operand_pointer(cfg, d, op)
        t = d.storage_type(cfg.global_.loader(op).operand.element)
        # A broadcast operand was copied once: its copy is broadcast too.
        return (f"const GLOBAL {t}* {op} = workspace + {self._regions(cfg)[op]} + "
                f"({op}_batch_stride == 0 ? 0 : b * {self._entry(cfg, op)});")

    def kernel(self, cfg, d: Dialect) -> str:
        main = super().kernel(cfg, d)
        return "\n\n".join([self.copy_kernel(cfg, d, op) for op in self._copied(cfg)] + [main])

    def copy_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        """The kernel that writes operand ``op``'s copy into its workspace region (a row copy or a
        transpose here; a subclass may fill the region otherwise, `copy_launch` launching it)."""
        if op in cfg.row_copies:
            return self._copy_kernel(cfg, d, op)
        return self._transpose_kernel(cfg, d, op)

    def _copy_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        """Operand ``op`` into its region row by row in its own layout (batch/repitch.py)."""
        element = cfg.global_.loader(op).operand.element
        rows, length = self.copy_shape(cfg, op, "M", "N", "K")
        t = repitch.bits_type(d, element.itemsize)
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({repitch.UNITS}) void gemm_engine_copy_{op}(\n    {self.signature(cfg).render(d)})",
            "{",
            self._pitch(cfg),
            f"const GLOBAL {t}* src = (const GLOBAL {t}*)({op}_base + {op}_offset);",
            f"GLOBAL {t}* dst = (GLOBAL {t}*)(workspace + {self._regions(cfg)[op]});",
            # A broadcast operand (batch stride 0): copied once.
            *repitch.body(d, element, dict(cfg.copy_widths)[op], "src", f"{op}_ld", f"{op}_batch_stride", "dst",
                          rows, length, self.pitch_name(cfg, op), f"({op}_batch_stride == 0 ? 1 : batch)"),
            "}",
        ])

    def _transpose_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        """Operand ``op`` (element (k, x) at ``k * ld + x``: a row-major rhs or a column-major lhs)
        into its region as rows of k: ``x * k_pitch + k``."""
        t = d.storage_type(cfg.global_.loader(op).operand.element)
        x_extent = "M" if op == "lhs" else "N"
        params = self.signature(cfg).render(d)
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({_UNITS}) void gemm_engine_k_major_{op}(\n    {params})",
            "{",
            # A padded row: the column reads of the second half hit 32 different banks.
            f"LOCAL {t} tile[{_TILE * (_TILE + 1)}];",
            self._pitch(cfg),
            f"const i64 tiles_x = ({x_extent} + {_TILE - 1}) / {_TILE};",
            f"const i64 tiles = ((K + {_TILE - 1}) / {_TILE}) * tiles_x;",
            "const i64 b = CUBE_ID / tiles;",
            # x fastest: neighbouring cubes read neighbouring pieces of the same source rows.
            f"const i64 k0 = ((CUBE_ID % tiles) / tiles_x) * {_TILE};",
            f"const i64 x0 = ((CUBE_ID % tiles) % tiles_x) * {_TILE};",
            # A broadcast operand is copied once: its later entries' cubes copy no rows, and still
            # reach the barrier (PoCL miscompiled an early return before it: wrong values, stray writes).
            f"const i64 x_rows = (b > 0 && {op}_batch_stride == 0) ? 0 : {x_extent};",
            f"const GLOBAL {t}* src = {op}_base + {op}_offset + b * {op}_batch_stride;",
            f"GLOBAL {t}* dst = workspace + {self._regions(cfg)[op]} + b * {x_extent} * k_pitch;",
            f"const int tx = UNIT_ID % {_TILE}, ty = UNIT_ID / {_TILE};",
            *self._copy_body(cfg, d, op, "x_rows"),
            "}",
        ])

    def _copy_body(self, cfg: KMajorBatchConfig, d: Dialect, op: str, x_extent: str) -> list[str]:
        """The transposing copy of one 64 x 64 tile, through a padded shared tile (both the reads
        and the writes whole rows)."""
        scalar_read = [
            "#pragma unroll",
            f"for (int i = ty; i < {_TILE}; i += {_ROWS}) {{",
            "const i64 k = k0 + i, x = x0 + tx;",
            f"if (k < K && x < {x_extent}) tile[i * {_TILE + 1} + tx] = src[k * {op}_ld + x];",
            "}"]
        element = cfg.global_.loader(op).operand.element
        if element.itemsize < 4:
            return self._packed_transpose(op, x_extent, element.itemsize, d.storage_type(element), scalar_read)
        return [
            *scalar_read,
            "SYNC_CUBE();",
            "#pragma unroll",
            f"for (int i = ty; i < {_TILE}; i += {_ROWS}) {{",
            "const i64 x = x0 + i, k = k0 + tx;",
            f"if (k < K && x < {x_extent}) dst[x * k_pitch + k] = tile[tx * {_TILE + 1} + i];",
            "}"]

    @staticmethod
    def _packed_transpose(op: str, x_extent: str, size: int, t: str, scalar_read: list[str]) -> list[str]:
        """The transposing copy of 1- and 2-byte elements a 32-bit word at a time: the H100 moved
        about the same elements per second whatever their size (tf32 4096^2 52 us, f16 4093^2 54,
        int8 4096^2 38: bench/results/h100/kernel_durations.md, notes), so packing 4
        or 2 to a load and a store cuts the instructions that bound it. Reads go by words where the
        source rows are 4-byte aligned (else element by element); writes always (the copy's rows
        are whole 16-byte chunks), element by element only at the end of K."""
        words = 4 // size
        per = _TILE // words                 # units along one tile row
        rows = _UNITS // per                 # tile rows per pass
        pitch, bits = _TILE + 1, 8 * size
        word = "unsigned"
        unpack = " ".join(f"tile[i * {pitch} + c * {words} + {j}] = (T)(w >> {bits * j});" for j in range(words))
        pack = " | ".join(f"((unsigned)(U)tile[(c * {words} + {j}) * {pitch} + i] << {bits * j})" for j in range(words))
        utype = "unsigned char" if size == 1 else "unsigned short"
        return [
            f"typedef {t} T; typedef {utype} U;",
            f"const int c = UNIT_ID % {per};",
            f"if (((((unsigned long long)src) | (unsigned long long)({op}_ld * {size})) & 3) == 0) {{",
            "#pragma unroll",
            f"for (int i = UNIT_ID / {per}; i < {_TILE}; i += {rows}) {{",
            f"const i64 k = k0 + i, x = x0 + c * {words};",
            "if (k >= K) continue;",
            f"if (x + {words} <= {x_extent}) {{ const {word} w = *(const GLOBAL {word}*)(src + k * {op}_ld + x); {unpack} }}",
            f"else for (int j = 0; j < {words}; ++j) if (x + j < {x_extent}) tile[i * {pitch} + c * {words} + j] = src[k * {op}_ld + x + j];",
            "}",
            "} else {",
            *scalar_read,
            "}",
            "SYNC_CUBE();",
            "#pragma unroll",
            f"for (int i = UNIT_ID / {per}; i < {_TILE}; i += {rows}) {{",
            f"const i64 x = x0 + i, k = k0 + c * {words};",
            f"if (x >= {x_extent} || k >= K) continue;",
            f"if (k + {words} <= K) *(GLOBAL {word}*)(dst + x * k_pitch + k) = {pack};",
            f"else for (int j = 0; j < {words}; ++j) if (k + j < K) dst[x * k_pitch + k + j] = tile[(c * {words} + j) * {pitch} + i];",
            "}"]
