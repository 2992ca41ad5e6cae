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
from ..problem import Layout, MatmulProblem
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
    pitch_align: int = field(default=4, kw_only=True)   # elements per 16 bytes
    #: Operands whose source is K-major already (copied for their alignment: re-pitched, not transposed).
    k_major_sources: tuple[str, ...] = field(default=(), kw_only=True)

    @property
    def copies(self) -> tuple[str, ...]:
        return tuple(name for name, on in (("lhs", self.lhs_copy), ("rhs", self.rhs_copy)) if on)


def k_pitch(k: int, align: int) -> int:
    """Row length (elements) of a transposed operand: K rounded up to whole 16-byte chunks."""
    return -(-k // align) * align


class KMajorBatchMatmul(PartitionedBatchMatmul):
    name = "k_major_batch"
    passes_weights = False   # its operand copies and tensor maps know nothing of packed weights

    def copies_for(self, problem: MatmulProblem) -> tuple[bool, bool]:
        """Whether lhs / rhs are copied: the ones the tile cannot read in their layout."""
        if not self.global_.requires_k_major(problem):
            return False, False
        return problem.lhs_layout is not Layout.ROW, problem.rhs_layout is not Layout.COL

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        lhs_copy, rhs_copy = self.copies_for(problem)
        if not (lhs_copy or rhs_copy):
            return super().setup(problem, selection, dialect)
        align = 16 // problem.lhs.itemsize
        inner = replace(problem, lhs_layout=Layout.ROW if lhs_copy else problem.lhs_layout,
                        rhs_layout=Layout.COL if rhs_copy else problem.rhs_layout,
                        lhs_align=align if lhs_copy else problem.lhs_align,
                        rhs_align=align if rhs_copy else problem.rhs_align)
        base = super().setup(inner, selection, dialect)
        return KMajorBatchConfig(global_=base.global_, dispatch=base.dispatch,
                                 persistent_cubes=base.persistent_cubes, lhs_copy=lhs_copy,
                                 rhs_copy=rhs_copy, pitch_align=align,
                                 k_major_sources=tuple(op for op, copy, layout, k_major in
                                                       (("lhs", lhs_copy, problem.lhs_layout, Layout.ROW),
                                                        ("rhs", rhs_copy, problem.rhs_layout, Layout.COL))
                                                       if copy and Layout(layout) is k_major))

    def _copied(self, cfg) -> tuple[str, ...]:
        return cfg.copies if isinstance(cfg, KMajorBatchConfig) else ()

    def launches(self, cfg: BatchConfig, problem: MatmulProblem) -> list[Launch]:
        extent = {"lhs": problem.m, "rhs": problem.n}
        tiles_k = -(-problem.k // _TILE)
        return [Launch(f"gemm_engine_k_major_{op}", problem.batch * tiles_k * -(-extent[op] // _TILE),
                       _UNITS, dynamic_shared=False) for op in self._copied(cfg)] + super().launches(cfg, problem)

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem):
        copied = self._copied(cfg)
        if not copied:
            return None
        pitch = k_pitch(problem.k, cfg.pitch_align)
        rows = sum({"lhs": problem.m, "rhs": problem.n}[op] for op in copied)
        return Workspace(problem.lhs, problem.batch * rows * pitch)

    # -- kernels ---------------------------------------------------------------------------------
    def signature(self, cfg):
        signature = super().signature(cfg)
        if not self._copied(cfg):
            return signature
        return signature.extended(array("workspace", cfg.global_.lhs_loader.operand.element.storage,
                                        writable=True))

    def scope(self, cfg, d=None):
        scope = super().scope(cfg, d)
        # The copies are read through their own pointers (`operand_pointer`) with rows k_pitch long
        # (a batch level passing tensor maps encodes theirs from the copies).
        copies = {op: replace(scope.operand(op), ptr=op, ld="k_pitch") for op in self._copied(cfg)}
        return replace(scope, **copies)

    def _regions(self, cfg) -> dict[str, str]:
        """Element offset of each copied operand's region in the workspace."""
        return {"lhs": "0", "rhs": "batch * M * k_pitch" if cfg.lhs_copy else "0"}

    def _pitch(self, cfg) -> str:
        a = cfg.pitch_align
        return f"const i64 k_pitch = (K + {a - 1}) & ~(i64){a - 1};"

    def pointers(self, cfg, d):
        lines = super().pointers(cfg, d)
        return [self._pitch(cfg)] + lines if self._copied(cfg) else lines

    def operand_pointer(self, cfg, d, op):
        if op not in self._copied(cfg):
            return super().operand_pointer(cfg, d, op)
        t = d.storage_type(cfg.global_.loader(op).operand.element)
        x = "M" if op == "lhs" else "N"
        # A broadcast operand was copied once: its copy is broadcast too.
        return (f"const GLOBAL {t}* {op} = workspace + {self._regions(cfg)[op]} + "
                f"({op}_batch_stride == 0 ? 0 : b * {x} * k_pitch);")

    def kernel(self, cfg, d: Dialect) -> str:
        main = super().kernel(cfg, d)
        return "\n\n".join([self._transpose_kernel(cfg, d, op) for op in self._copied(cfg)] + [main])

    def _transpose_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        """Operand ``op`` (element (k, x) at ``k * ld + x``: a row-major rhs or a column-major lhs)
        into its region as rows of k: ``x * k_pitch + k``; a K-major source (element (k, x) at
        ``x * ld + k``) row by row."""
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
            f"if (b > 0 && {op}_batch_stride == 0) return;   /* a broadcast operand: copied once */",
            f"const GLOBAL {t}* src = {op}_base + {op}_offset + b * {op}_batch_stride;",
            f"GLOBAL {t}* dst = workspace + {self._regions(cfg)[op]} + b * {x_extent} * k_pitch;",
            f"const int tx = UNIT_ID % {_TILE}, ty = UNIT_ID / {_TILE};",
            *self._copy_body(cfg, d, op, x_extent),
            "}",
        ])

    def _copy_body(self, cfg: KMajorBatchConfig, d: Dialect, op: str, x_extent: str) -> list[str]:
        """The copy of one 64 x 64 tile: through a padded shared tile when it transposes (both the
        reads and the writes whole rows), straight along k when the source is K-major."""
        if op in cfg.k_major_sources:
            return ["#pragma unroll",
                    f"for (int i = ty; i < {_TILE}; i += {_ROWS}) {{",
                    "const i64 x = x0 + i, k = k0 + tx;",
                    f"if (k < K && x < {x_extent}) dst[x * k_pitch + k] = src[x * {op}_ld + k];",
                    "}"]
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
