"""Dequantize first: a quantized rhs expanded once per call into a dense K-major copy, which an
unchanged dense kernel then reads.

The K-major batch levels (batch/k_major.py, batch/tma_k_major.py) already run a pass in front of
their kernel that writes an operand's copy into a workspace, and point the kernel (its scope, its
tensor map) at the copy. `DequantizePass` is that machinery with the rhs's copy written by another
kernel, ``gemm_engine_dequantize_rhs``: it reads the packed words of a quantized weight
(quant/format.py, either layout) with their scales and zeros and writes the values, each rounded
once to the activations' type (float32 activations: exact), as rows of k (``(k, n)`` at ``n *
k_pitch + k``). The kernels after it see `dense_view` of the problem: a column-major (K-major)
rhs of the activations' type, 16-byte aligned, which every dense global level reads (wgmma without
transposes, TMA boxes of whole rows). So each dense algorithm has a quantized twin that differs in
its batch slot only (algorithms/dequantized.py). A weight read transposed (``W.T``,
`TransposedQuantizedWeight`: the (N, K) ``b`` of a backward's ``gy @ W^T``) is the same copy: the pass
swaps the kernel's K and N back to the weight's, and the kernels after it read the copy as a
row-major rhs (an MN-major copy of the K-major level, rows of ``rhs_pitch``).

Why a pass and not the dequantizing loader (global_/read/dequantizing_loader.py): the loader
converts each weight once per tile row of M (and through registers, so it loses cp.async / TMA);
the pass converts it once per call and costs the packed bytes read plus ``2 * K * N`` bytes written
(the dense kernel's read of them is the dense kernel's own cost): int4 4096 x 4096 group 128 moves
8.4 + 33.6 MB, about 14 us at 3 TB/s. From a few dozen rows of M the dense tensor-core kernel's
speed pays for that (bench/SELECTION_NOTES.md, "Quantized weights").

The pass's work split (both its reads and its writes coalesced): a cube takes 64 columns by 32
*pieces* of each column's row of the copy, a piece being the values one unit writes contiguously:
16 bytes (int4 into 16-bit: one word; 8-bit codes into 16-bit: two words) or one word where a word
holds more (int4 into float32: 32 bytes). First the cube's packed words are read with columns
fastest (a plane reads 32 consecutive words of a word row: 128 bytes, in both layouts; every unit's
loads issued before any is stored) into shared memory; then each plane converts and writes the 32
pieces of one column, consecutive units consecutive pieces of one row of the copy (512 contiguous
bytes a plane for 16-byte pieces). Writing each column's run from the unit that read its words put a
plane's 16-byte stores one row (8 KB at K = 4096) apart: on the H100 int4 4096 x 4096 took 82-96 us
against the ~14 us its bytes need (bench/results/h100/quantized.md, notes). The copy's rows are
``k_pitch`` long: K rounded up to whole pieces (16 bytes, whole words), so every piece lands inside
its row; the values past K are written as zeros.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..codegen.dialect import Dialect
from ..codegen.signature import KernelSignature, array
from ..dtypes import PACKED_WORDS
from ..errors import SetupError
from ..problem import Layout, MatmulProblem
from ..quant.format import WeightFormat
from .base import BatchConfig, Launch, Workspace
from .k_major import KMajorBatchConfig, KMajorBatchMatmul, k_pitch
from .tma_k_major import TmaKMajorBatchMatmul

DEQUANTIZE_KERNEL = "gemm_engine_dequantize_rhs"
_UNITS = 256
_COLUMNS = 64                 # columns of a cube: each plane reads 128 contiguous bytes of a word row
_PIECES = 32                  # pieces of a column's row a cube writes: one plane's consecutive stores
#: The activations' storage words the pass writes, and the 16-bit kind `Dialect.pack16x2` packs.
_KINDS = {"f16_bits": "f16", "bf16_bits": "bf16", "f32": None}


def dense_view(problem: MatmulProblem) -> MatmulProblem:
    """The dense problem the kernels after the pass see: the rhs the activations' type, K-major
    (column-major (K, N)), 16-byte aligned (the copy's rows are whole 16-byte chunks). A transposed
    weight's copy (the same rows, of the weight's K: the product's N) is a row-major rhs."""
    layout = Layout.ROW if problem.weights is not None and problem.weights.transposed else Layout.COL
    return replace(problem, weights=None, rhs_layout=layout, rhs_align=16 // problem.rhs.itemsize)


def weight_extents(problem: MatmulProblem) -> tuple:
    """(K, N) of the stored weight: the product's, or swapped for a transposed one."""
    return (problem.n, problem.k) if problem.weights.transposed else (problem.k, problem.n)


@dataclass(frozen=True)
class DequantizeFirstConfig(KMajorBatchConfig):
    """A K-major batch config whose rhs copy is the dequantized weight: its format, and whether K
    ends inside a piece (`piece_values`: the values past K are written as zeros)."""

    dequantized: WeightFormat | None = field(default=None, kw_only=True)
    k_ragged: bool = field(default=False, kw_only=True)

    @property
    def weights(self) -> WeightFormat | None:
        return self.dequantized


class DequantizePass:
    """The dequantizing pass in front of a K-major batch level (mixed in before it: see the
    module docstring). A dense problem is refused: the rhs must be a quantized weight."""

    passes_weights = True

    def check_weights(self, problem: MatmulProblem) -> None:
        if problem.weights is None:
            raise SetupError(self.name, "dequantizes a quantized rhs (gemm_engine.quantize) before the dense "
                                        "kernel; this problem's rhs is a dense array")
        self.global_.check_weights(dense_view(problem))   # the global level reads the dense copy

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> BatchConfig:
        w = problem.weights
        if w is None:
            raise SetupError(self.name, "dequantizes a quantized rhs; this problem's rhs is a dense array")
        if problem.rhs.storage not in _KINDS or problem.lhs.storage != problem.rhs.storage:
            raise SetupError(self.name, f"writes the weights as the activations' float32, float16 or bfloat16 "
                                        f"values, got {problem.lhs.name} activations and a {problem.rhs.name} rhs")
        if _KINDS[problem.rhs.storage] and dialect.backend == "cuda" and \
                (dialect.device.compute_capability or (0, 0)) < (8, 0):
            raise SetupError(self.name, "packs 16-bit pairs by cvt.rn.{f16,bf16}x2 (CUDA sm_80+)")
        base = super().setup(dense_view(problem), selection, dialect)
        kept = {f.name: getattr(base, f.name) for f in fields(base)}
        piece = piece_values(w, problem.rhs)
        # rows of whole pieces: whole words and whole 16-byte chunks (both powers of two); a
        # transposed weight's copy is the row-major rhs the dense view reads (rows of its N)
        kept.update(rhs_copy=True, dequantized=w, k_ragged=weight_extents(problem)[0] % piece != 0,
                    pitch_align=piece, mn_major_copies=("rhs",) if w.transposed else ())
        return DequantizeFirstConfig(**kept)

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> Workspace | None:
        if not isinstance(cfg, DequantizeFirstConfig):
            return super().workspace(cfg, problem)
        # The weight is one for every batch entry: its copy once, after the lhs copies if any.
        lhs = problem.batch * problem.m * k_pitch(problem.k, cfg.pitch_align) if cfg.lhs_copy else 0
        rows, length = self.copy_shape(cfg, "rhs", problem.m, problem.n, problem.k)
        return Workspace(problem.lhs, lhs + rows * k_pitch(length, cfg.pitch_align))

    def signature(self, cfg: BatchConfig) -> KernelSignature:
        signature = super().signature(cfg)
        if not isinstance(cfg, DequantizeFirstConfig):
            return signature
        params = tuple(array("rhs_base", PACKED_WORDS.storage) if p.name == "rhs_base" else p
                       for p in signature.params)
        return KernelSignature(params + cfg.dequantized.params())

    def copy_launch(self, cfg: KMajorBatchConfig, problem: MatmulProblem, op: str) -> Launch:
        if op != "rhs" or not isinstance(cfg, DequantizeFirstConfig):
            return super().copy_launch(cfg, problem, op)
        w = cfg.dequantized
        k, n = weight_extents(problem)
        words = k_pitch(k, cfg.pitch_align) // w.per_word      # word rows of the copy's rows
        cubes = -(-n // _COLUMNS) * -(-words // cube_word_rows(w, problem.rhs))
        return Launch(DEQUANTIZE_KERNEL, cubes, _UNITS, dynamic_shared=False)

    def copy_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        if op != "rhs" or not isinstance(cfg, DequantizeFirstConfig):
            return super().copy_kernel(cfg, d, op)
        element = cfg.global_.rhs_loader.operand.element
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({_UNITS}) void {DEQUANTIZE_KERNEL}(\n    {self.signature(cfg).render(d)})",
            "{",
            self._pitch(cfg),
            *dequantize_body(cfg.dequantized, d, element, f"workspace + {self._regions(cfg)['rhs']}", cfg.k_ragged,
                             self.pitch_name(cfg, "rhs")),
            "}"])


def piece_values(w: WeightFormat, element) -> int:
    """Values of one piece (module docstring): 16 bytes of ``element``, or one word where it holds more."""
    return max(w.per_word, 16 // element.itemsize)


def cube_word_rows(w: WeightFormat, element) -> int:
    """Word rows of the packed weight one cube converts: `_PIECES` pieces of each column."""
    return _PIECES * piece_values(w, element) // w.per_word


def dequantize_body(w: WeightFormat, d: Dialect, element, region: str, k_ragged: bool,
                    row_pitch: str = "k_pitch") -> list[str]:
    """Statements of the pass (module docstring): this cube's 64 columns by `cube_word_rows` word
    rows, read from ``rhs`` (the kernel's packed words and ``qscale`` / ``qzero``) into shared
    memory, then written as ``element`` values into the copy at ``region`` (rows of ``row_pitch``,
    which the caller declares), a plane's units writing consecutive pieces of one row. The
    weight's K and N are the kernel's, swapped where the product reads it transposed."""
    p, u32 = w.per_word, d.c_type("u32")
    kind = _KINDS[element.storage]
    piece = piece_values(w, element)
    per_piece, rows = piece // p, cube_word_rows(w, element)
    reads, writes, pitch = _COLUMNS * rows // _UNITS, _COLUMNS * _PIECES // _UNITS, _COLUMNS + 1
    # One scale for the whole piece where no group boundary falls inside it (groups are whole words).
    one_scale = not w.group_size or w.group_size % piece == 0
    k, n = ("N", "K") if w.transposed else ("K", "N")
    lines = [
        # A padded row: a plane's reads down one column (stride 65 words) hit 32 different banks.
        f"LOCAL {u32} dq_tile[{rows * pitch}];",
        f"const i64 dq_k = {k}, dq_n = {n};",
        f"const i64 words_k = (dq_k + {p - 1}) / {p};",
        f"const i64 pitch_words = {row_pitch} / {p};",
        f"const i64 strips = (dq_n + {_COLUMNS - 1}) / {_COLUMNS};",
        # Neighbouring cubes take neighbouring columns of the same word rows.
        f"const i64 n0 = (CUBE_ID % strips) * {_COLUMNS};",
        f"const i64 kw0 = (CUBE_ID / strips) * {rows};",
        f"const GLOBAL {u32}* RESTRICT packed = rhs_base + rhs_offset;",
        *w.pointers(d),
        f"GLOBAL {d.storage_type(element)}* RESTRICT dst = {region};",
        # Columns fastest, every load issued before any word is stored (all in flight together).
        f"{u32} dq_r[{reads}];",
        "#pragma unroll",
        f"for (int i = 0; i < {reads}; ++i) {{",
        f"const int e = i * {_UNITS} + UNIT_ID;",
        f"const i64 kw = kw0 + e / {_COLUMNS}, col = n0 + e % {_COLUMNS};",
        f"dq_r[i] = kw < words_k && col < dq_n ? packed[{w.word_index('kw', 'col', 'rhs_ld', 'dq_k')}] : 0u;",
        "}",
        "#pragma unroll",
        f"for (int i = 0; i < {reads}; ++i) {{",
        f"const int e = i * {_UNITS} + UNIT_ID;",
        f"dq_tile[(e / {_COLUMNS}) * {pitch} + e % {_COLUMNS}] = dq_r[i];",
        "}",
        "SYNC_CUBE();",
        # A plane's 32 units: the 32 consecutive pieces of one column's row.
        "#pragma unroll",
        f"for (int i = 0; i < {writes}; ++i) {{",
        f"const int e = i * {_UNITS} + UNIT_ID;",
        f"const int c = e / {_PIECES}, q = e % {_PIECES};",
        f"const i64 col = n0 + c, kw = kw0 + q * {per_piece};",
        "if (col < dq_n && kw < pitch_words) {",
        *(f"const {u32} dq_w{h} = dq_tile[(q * {per_piece} + {h}) * {pitch} + c];" for h in range(per_piece)),
    ]
    if one_scale:
        lines += _scale_zero(w, d, f"kw * {p}", "")   # a piece starts before K (the pitch less a piece < K)
    values = []
    for h in range(per_piece):
        k0 = f"(kw + {h}) * {p}"
        if not one_scale:   # a word past K (the row's padding) takes the last row's scale
            lines += _scale_zero(w, d, f"({k0} < dq_k ? {k0} : dq_k - 1)" if k_ragged else k0, str(h))
        suffix = "" if one_scale else str(h)
        for j in range(p):
            value = w.value(d, f"dq_w{h}", j, f"dq_s{suffix}", f"dq_z{suffix}")
            values.append(f"({k0} + {j} < dq_k ? {value} : 0.0f)" if k_ragged and (h or j) else value)
    return lines + [*_store(d, kind, values, "dst", f"col * {row_pitch} + kw * {p}"), "}", "}"]


def _scale_zero(w: WeightFormat, d: Dialect, k: str, suffix: str) -> list[str]:
    """The float32 scale (and biased zero, `WeightFormat.biased_zero`) of row ``k`` of ``col``."""
    out = [f"const float dq_s{suffix} = {w.scale_value(d, k, 'col')};"]
    if w.kind != "fp8_e4m3":
        out.append(f"const float dq_z{suffix} = {w.biased_zero(w.zero_value(d, k, 'col'))};")
    return out


def _store(d: Dialect, kind: str | None, values: list[str], base: str, offset: str) -> list[str]:
    """Statements storing ``values`` (float32 expressions) contiguously at element ``offset`` of
    ``base``: 16-bit pairs rounded to nearest even by `Dialect.pack16x2`, as one vector of 32-bit
    words (float32: vectors of four), aligned to its width by the copy's pitch. The vector is
    addressed as an index into a vector pointer: nvcc 13 split the same store through an element
    pointer (offset ``col * k_pitch``, k_pitch a known multiple of 8) into four 4-byte stores."""
    lanes = "xyzw"
    if kind is None:
        out = []
        for h in range(0, len(values), 4):
            ref = d.vector_ref("global", "f32", 4, f"(GLOBAL {d.vector_type('f32', 4)}*){base} + ({offset}) / 4 + {h // 4}")
            out += [f"{{ {d.vector_type('f32', 4)} dq_f;",
                    *(f"dq_f.{lanes[j]} = {v};" for j, v in enumerate(values[h:h + 4])),
                    f"{ref} = dq_f; }}"]
        return out
    words = [d.pack16x2(kind, values[2 * j + 1], values[2 * j]) for j in range(len(values) // 2)]
    vec = d.vector_type("u32", len(words))
    return [f"{{ {vec} dq_v;",
            *(f"dq_v.{lanes[j]} = {v};" for j, v in enumerate(words)),
            f"{d.vector_ref('global', 'u32', len(words), f'(GLOBAL {vec}*){base} + ({offset}) / {len(values)}')} = dq_v; }}"]


class DequantizeFirstBatchMatmul(DequantizePass, KMajorBatchMatmul):
    """The partitioned batch level after the dequantizing pass (every backend)."""

    name = "dequantize_first_batch"


class TmaDequantizeFirstBatchMatmul(DequantizePass, TmaKMajorBatchMatmul):
    """The persistent TMA batch level after the dequantizing pass (Hopper): the rhs tensor map
    describes the copy (`TmaKMajorBatchMatmul.map_source`)."""

    name = "tma_dequantize_first_batch"
