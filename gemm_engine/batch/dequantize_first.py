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
its batch slot only (algorithms/dequantized.py).

Why a pass and not the dequantizing loader (global_/read/dequantizing_loader.py): the loader
converts each weight once per tile row of M (and through registers, so it loses cp.async / TMA);
the pass converts it once per call and costs the packed bytes read plus ``2 * K * N`` bytes written
(the dense kernel's read of them is the dense kernel's own cost): int4 4096 x 4096 group 128 moves
8.4 + 33.6 MB, about 14 us at 3 TB/s. From a few dozen rows of M the dense tensor-core kernel's
speed pays for that (bench/SELECTION_NOTES.md, "Quantized weights").

The pass's work split: a cube takes 64 columns (a plane reads 32 consecutive words of a word row:
128 bytes, in both layouts) by 16 word rows; each unit 4 word rows of one column, loaded before
any is converted (4 loads in flight a unit), whose values are contiguous in the copy (int4 into
16-bit: 64 bytes, two whole sectors, by 16-byte stores). The copy's rows are ``k_pitch`` long: K
rounded up to 16 bytes and to whole words, so every word's values land inside its row (the codes
past K as zeros).
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
_RUN = 4                      # word rows a unit expands (loads in flight a unit)
_RUNS = _UNITS // _COLUMNS    # runs stacked in a cube
#: The activations' storage words the pass writes, and the 16-bit kind `Dialect.pack16x2` packs.
_KINDS = {"f16_bits": "f16", "bf16_bits": "bf16", "f32": None}


def dense_view(problem: MatmulProblem) -> MatmulProblem:
    """The dense problem the kernels after the pass see: the rhs the activations' type, K-major
    (column-major (K, N)), 16-byte aligned (the copy's rows are whole 16-byte chunks)."""
    return replace(problem, weights=None, rhs_layout=Layout.COL, rhs_align=16 // problem.rhs.itemsize)


@dataclass(frozen=True)
class DequantizeFirstConfig(KMajorBatchConfig):
    """A K-major batch config whose rhs copy is the dequantized weight: its format, and whether K
    ends inside a word (the codes past it are written as zeros)."""

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
        kept.update(rhs_copy=True, dequantized=w, k_ragged=problem.k % w.per_word != 0,
                    # whole words inside each row, rows of whole 16-byte chunks (both powers of two)
                    pitch_align=max(16 // problem.rhs.itemsize, w.per_word))
        return DequantizeFirstConfig(**kept)

    def workspace(self, cfg: BatchConfig, problem: MatmulProblem) -> Workspace | None:
        if not isinstance(cfg, DequantizeFirstConfig):
            return super().workspace(cfg, problem)
        # The weight is one for every batch entry: its copy once, after the lhs copies if any.
        rows = (problem.batch * problem.m if cfg.lhs_copy else 0) + problem.n
        return Workspace(problem.lhs, rows * k_pitch(problem.k, cfg.pitch_align))

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
        words = -(-problem.k // cfg.dequantized.per_word)
        cubes = -(-problem.n // _COLUMNS) * -(-words // (_RUN * _RUNS))
        return Launch(DEQUANTIZE_KERNEL, cubes, _UNITS, dynamic_shared=False)

    def copy_kernel(self, cfg: KMajorBatchConfig, d: Dialect, op: str) -> str:
        if op != "rhs" or not isinstance(cfg, DequantizeFirstConfig):
            return super().copy_kernel(cfg, d, op)
        element = cfg.global_.rhs_loader.operand.element
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({_UNITS}) void {DEQUANTIZE_KERNEL}(\n    {self.signature(cfg).render(d)})",
            "{",
            self._pitch(cfg),
            *dequantize_body(cfg.dequantized, d, element, f"workspace + {self._regions(cfg)['rhs']}", cfg.k_ragged),
            "}"])


def dequantize_body(w: WeightFormat, d: Dialect, element, region: str, k_ragged: bool) -> list[str]:
    """Statements of the pass (module docstring): this unit's run of word rows of one column, read
    from ``rhs`` (the kernel's packed words and ``qscale`` / ``qzero``), written as ``element``
    values into the copy at ``region`` (rows of ``k_pitch``, which the caller declares)."""
    p, u32 = w.per_word, d.c_type("u32")
    kind = _KINDS[element.storage]
    # One scale for the whole run where no group boundary falls inside it.
    per_run = not w.group_size or w.group_size % (_RUN * p) == 0
    lines = [
        f"const i64 words_k = (K + {p - 1}) / {p};",
        f"const i64 strips = (N + {_COLUMNS - 1}) / {_COLUMNS};",
        # Neighbouring cubes take neighbouring columns of the same word rows.
        f"const i64 col = (CUBE_ID % strips) * {_COLUMNS} + UNIT_ID % {_COLUMNS};",
        f"const i64 kw0 = ((CUBE_ID / strips) * {_RUNS} + UNIT_ID / {_COLUMNS}) * {_RUN};",
        "if (col >= N || kw0 >= words_k) return;",
        f"const GLOBAL {u32}* RESTRICT packed = rhs_base + rhs_offset;",
        *w.pointers(d),
        f"GLOBAL {d.storage_type(element)}* RESTRICT dst = {region} + col * k_pitch;",
        # Every word of the run is read before any is expanded: the run's loads are in flight together.
        *(f"const {u32} dq_w{i} = kw0 + {i} < words_k ? packed[{w.word_index(f'kw0 + {i}', 'col', 'rhs_ld')}] : 0u;"
          for i in range(_RUN)),
    ]
    if per_run:
        lines += _scale_zero(w, d, f"kw0 * {p}", "")
    for i in range(_RUN):
        k0 = f"(kw0 + {i}) * {p}"
        suffix = "" if per_run else str(i)
        values = []
        for j in range(p):
            value = w.value(d, f"dq_w{i}", j, f"dq_s{suffix}", f"dq_z{suffix}")
            values.append(f"({k0} + {j} < K ? {value} : 0.0f)" if k_ragged and j else value)
        lines += [f"if (kw0 + {i} < words_k) {{", *([] if per_run else _scale_zero(w, d, k0, suffix)),
                  *_store(d, kind, values, f"dst + {k0}"), "}"]
    return lines


def _scale_zero(w: WeightFormat, d: Dialect, k: str, suffix: str) -> list[str]:
    """The float32 scale (and biased zero, `WeightFormat.biased_zero`) of row ``k`` of ``col``."""
    out = [f"const float dq_s{suffix} = {w.scale_value(d, k, 'col')};"]
    if w.kind != "fp8_e4m3":
        out.append(f"const float dq_z{suffix} = {w.biased_zero(w.zero_value(d, k, 'col'))};")
    return out


def _store(d: Dialect, kind: str | None, values: list[str], pointer: str) -> list[str]:
    """Statements storing ``values`` (float32 expressions) contiguously at ``pointer``: 16-bit pairs
    rounded to nearest even by `Dialect.pack16x2`, as one vector of 32-bit words (float32: vectors
    of four), aligned to its width by the copy's pitch."""
    lanes = "xyzw"
    if kind is None:
        out = []
        for h in range(0, len(values), 4):
            out += [f"{{ {d.vector_type('f32', 4)} dq_f;",
                    *(f"dq_f.{lanes[j]} = {v};" for j, v in enumerate(values[h:h + 4])),
                    f"{d.vector_ref('global', 'f32', 4, f'{pointer} + {h}')} = dq_f; }}"]
        return out
    words = [d.pack16x2(kind, values[2 * j + 1], values[2 * j]) for j in range(len(values) // 2)]
    return [f"{{ {d.vector_type('u32', len(words))} dq_v;",
            *(f"dq_v.{lanes[j]} = {v};" for j, v in enumerate(words)),
            f"{d.vector_ref('global', 'u32', len(words), pointer)} = dq_v; }}"]


class DequantizeFirstBatchMatmul(DequantizePass, KMajorBatchMatmul):
    """The partitioned batch level after the dequantizing pass (every backend)."""

    name = "dequantize_first_batch"


class TmaDequantizeFirstBatchMatmul(DequantizePass, TmaKMajorBatchMatmul):
    """The persistent TMA batch level after the dequantizing pass (Hopper): the rhs tensor map
    describes the copy (`TmaKMajorBatchMatmul.map_source`)."""

    name = "tma_dequantize_first_batch"
