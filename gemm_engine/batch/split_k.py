"""Split-K batch matmul: for problems with little output and a long K.

A problem with fewer output tiles than the device has compute units leaves most of them idle, and
each busy cube walks the whole K alone (64 x 64 x 65536 is one 64 x 64 tile: one cube). Split-K
cuts K into ``splits`` ranges of ``k_chunk`` (a multiple of the stage's K, so only the last range
has a tail): cubes = tiles x splits. Two kernels, both taking the batch level's usual arguments
plus a workspace of ``batch x splits x M x N`` accumulators:

1. ``gemm_engine_kernel``: the global matmul over one K range, storing its partial tile, unscaled,
   into the workspace (its scope says so: the K range's length ``k_len``, operand pointers that
   start at the range, the output the cube's slice of the workspace, whose rows are N long);
2. ``gemm_engine_reduce``: one unit per output element adds the partials in split order and stores
   the sum through the epilogue.

Deterministic: the same problem on the same device always gives the same splits and the same
order of additions, so the same bits; no atomics.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..codegen.dialect import Dialect
from ..dtypes import FLOAT32, FLOAT64, ElementType
from ..errors import SetupError
from ..epilogue.spec import IDENTITY, Epilogue
from ..problem import Layout, MatmulProblem
from ..compose.selection import Knob
from .base import KERNEL_NAME, BatchConfig, CubeScope, Launch, OperandRef, Workspace
from .partitioned import PartitionedBatchMatmul
from ..codegen.signature import array

REDUCE_KERNEL_NAME = "gemm_engine_reduce"
_REDUCE_UNITS = 256
#: Workspace cap: more splits than fit are not worth a larger scratch buffer.
_MAX_WORKSPACE_BYTES = 256 << 20


@dataclass(frozen=True)
class SplitKBatchConfig(BatchConfig):
    splits: int = field(default=2, kw_only=True)
    k_chunk: int = field(default=0, kw_only=True)
    lhs_k_step: str = field(default="1", kw_only=True)    # element step of lhs along K: 1 or lhs_ld
    rhs_k_step: str = field(default="rhs_ld", kw_only=True)
    final: ElementType = field(default=FLOAT32, kw_only=True)
    final_epilogue: Epilogue = field(default=IDENTITY, kw_only=True)

    @property
    def result(self) -> ElementType:
        return self.final

    @property
    def epilogue(self) -> Epilogue:
        return self.final_epilogue


def choose_splits(problem: MatmulProblem, tiles: int, stage_k: int, compute_units: int,
                  requested: int = 0, acc_bytes: int = 4) -> tuple[int, int]:
    """(splits, k_chunk): enough cubes for about two per compute unit, each range at least four
    stages long (and a multiple of 8 elements so vector alignment survives the offset)."""
    unit = stage_k * 8 // math.gcd(stage_k, 8)
    if requested:
        splits = requested
    else:
        splits = max(1, -(-2 * compute_units // max(tiles, 1)))
        splits = min(splits, max(1, problem.k // (4 * unit)))
    per_split = problem.batch * problem.m * problem.n * acc_bytes
    splits = max(1, min(splits, _MAX_WORKSPACE_BYTES // max(per_split, 1)))
    chunk = -(-(-(-problem.k // splits)) // unit) * unit
    return -(-problem.k // chunk), chunk


class SplitKBatchMatmul(PartitionedBatchMatmul):
    #: Its cubes see K ranges and an identity epilogue (the reduction applies the call's).
    forwards_block_scales = False
    forwards_pairs = False      # the reduction applies the epilogue per element
    name = "split_k_batch"
    knobs = PartitionedBatchMatmul.knobs + (
        Knob("split_k", 0, "K ranges, each over its own cubes (0: enough for about two cubes per compute unit)"),)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> SplitKBatchConfig:
        if selection.persistent:
            raise SetupError(self.name, "split-K launches one cube per tile and K range, not persistent cubes")
        acc = FLOAT64 if problem.lhs.compute == "f64" else FLOAT32
        if problem.lhs.compute not in ("f32", "f64"):
            raise SetupError(self.name, f"partial sums of {problem.lhs.name} are not floating point")
        # The global matmul stores raw partial sums; the epilogue runs once, in the reduction.
        inner = replace(problem, out=acc, epilogue=IDENTITY)
        base = super().setup(inner, selection, dialect)
        tiles = self.tiles(base, problem)
        splits, chunk = choose_splits(problem, tiles, base.global_.stage.stage_k,
                                      max(1, dialect.device.compute_units),
                                      selection.split_k, acc.itemsize)
        if splits < 2:
            raise SetupError(self.name, f"K = {problem.k} is too short to split over {tiles} output tiles")
        w = problem.weights
        if w is not None and (chunk % w.per_word or w.group_size and chunk % w.group_size):
            raise SetupError(self.name, f"K ranges of {chunk} rows would cut a packed word of {w.per_word} rows "
                                        f"or a group of {w.group_size} (the global level's stage_k must be a "
                                        f"multiple of both)")
        return SplitKBatchConfig(
            global_=base.global_, dispatch=base.dispatch, splits=splits, k_chunk=chunk,
            lhs_k_step="1" if problem.lhs_layout is Layout.ROW else "lhs_ld",
            rhs_k_step="rhs_ld" if problem.rhs_layout is Layout.ROW else "1",
            final=problem.out, final_epilogue=problem.epilogue)

    def launches(self, cfg: SplitKBatchConfig, problem: MatmulProblem) -> list[Launch]:
        outputs = problem.batch * problem.m * problem.n
        return [Launch(KERNEL_NAME, self.tiles(cfg, problem) * cfg.splits, cfg.units),
                Launch(REDUCE_KERNEL_NAME, -(-outputs // _REDUCE_UNITS), _REDUCE_UNITS, dynamic_shared=False)]

    def cube_count(self, cfg, problem):
        return self.tiles(cfg, problem) * cfg.splits

    def workspace(self, cfg: SplitKBatchConfig, problem: MatmulProblem) -> Workspace:
        return Workspace(cfg.global_.out, problem.batch * cfg.splits * problem.m * problem.n)

    # -- the split kernel: the partitioned one with a split index, moved pointers, its K range -----
    def signature(self, cfg):
        return super().signature(cfg).extended(array("workspace", cfg.global_.out.storage, writable=True))

    def scope(self, cfg, d=None):
        return CubeScope(lhs=OperandRef("lhs", "lhs_ld"), rhs=OperandRef("rhs", "rhs_ld"),
                         out=OperandRef("out", "N"), k="k_len")

    def cube_index(self, cfg):
        return [f"const i64 split = CUBE_ID % {cfg.splits};", f"const i64 cube = CUBE_ID / {cfg.splits};"]

    def pointers(self, cfg, d):
        g = cfg.global_
        lhs_t = d.storage_type(g.lhs_loader.operand.element)
        rhs_t = d.storage_type(g.rhs_loader.operand.element)
        return [f"const i64 k_begin = split * {cfg.k_chunk};",
                f"const i64 k_len = K - k_begin < {cfg.k_chunk} ? K - k_begin : {cfg.k_chunk};",
                f"const GLOBAL {lhs_t}* lhs = lhs_base + lhs_offset + b * lhs_batch_stride + k_begin * {cfg.lhs_k_step};",
                f"const GLOBAL {rhs_t}* rhs = rhs_base + rhs_offset + b * rhs_batch_stride + {self._rhs_step(cfg)};",
                f"GLOBAL {d.storage_type(g.out)}* out = workspace + (b * {cfg.splits} + split) * M * N;",
                *self._weight_pointers(cfg, d)]

    @staticmethod
    def _rhs_step(cfg) -> str:
        """Expression: how far the rhs moves for the split's K range (packed words: whole words)."""
        w = cfg.global_.weights
        return f"k_begin * {cfg.rhs_k_step}" if w is None else w.k_offset("k_begin", "rhs_ld")

    @staticmethod
    def _weight_pointers(cfg, d) -> list[str]:
        """Quantized weights' scales and zeros at the split's first group (whole groups: setup)."""
        w = cfg.global_.weights
        if w is None:
            return []
        lines = w.pointers(d)
        if w.group_size:
            lines += [f"qscale += (k_begin / {w.group_size}) * qscale_ld;"]
            lines += [f"qzero += (k_begin / {w.group_size}) * qzero_ld;"] if w.zeros else []
        return lines

    def kernel(self, cfg: SplitKBatchConfig, d: Dialect) -> str:
        return super().kernel(cfg, d) + "\n\n" + self.reduce_kernel(cfg, d)

    def reduce_kernel(self, cfg: SplitKBatchConfig, d: Dialect) -> str:
        acc = cfg.global_.out
        acc_t = d.storage_type(acc)
        params = self.signature(cfg).render(d)
        value = cfg.epilogue.apply(d, "sum", "row", "col")
        return "\n".join([
            f"KERNEL LAUNCH_BOUNDS({_REDUCE_UNITS}) void {REDUCE_KERNEL_NAME}(\n    {params})",
            "{",
            f"const i64 i = CUBE_ID * {_REDUCE_UNITS} + UNIT_ID;",
            "if (i < batch * M * N) {",
            "const i64 b = i / (M * N);",
            "const i64 row = (i / N) % M;",
            "const i64 col = i % N;",
            f"const GLOBAL {acc_t}* part = workspace + b * {cfg.splits} * M * N + row * N + col;",
            f"{acc_t} sum = part[0];",
            f"for (int s = 1; s < {cfg.splits}; ++s) sum += part[s * M * N];  /* fixed order: same bits every run */",
            f"GLOBAL {d.storage_type(cfg.result)}* out = out_base + out_offset + b * out_batch_stride;",
            *cfg.epilogue.pointers(d),
            d.store_global(cfg.result, "out", "row * out_ld + col", value),
            "}",
            "}",
        ])
