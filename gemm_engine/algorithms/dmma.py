"""Double-precision tensor-core algorithms: the DMMA tile (f64 ``mma.sync``: m16n8k8 on sm_90+,
m8n8k4 before) under the plane stage.

* ``simple_dmma``: the simple pipeline (single-stage global matmul, cyclic loaders, shared memory
  k-major) with `PlanePartitionedStage` and `DmmaTile`;
* ``pipelined_dmma``: the same stage and tile under `PipelinedGlobalMatmul` (a ring of ``cp.async``
  stages; `ChunkLoader` moves 16-byte chunks of two doubles, or 8-byte copies where an operand is
  only 8-byte aligned), shared memory in the operands' global layout; results leave as 16-byte
  pairs (`PairedWriter`) where the output's alignment allows.

Both run float64 only, on CUDA sm_80+ (FP64 tensor cores: on the H100 about twice the FP64 FMA
rate); everything else is refused with a SetupError. ``auto`` takes ``pipelined_dmma`` for float64
on sm_80+ (algorithms/rules.py).

Tiling: a plane owns ``partition_m x partition_n`` instruction tiles (16 x 8 on sm_90+, 8 x 8
before); the candidates below name a plane's extent, the same on both. A lane holds two doubles
(four registers) per 8 x 8 of output, so a 64 x 32 plane (as CUTLASS's SM80 DGEMM warps) takes 128
accumulator registers; with m16n8k8 it reads 24 doubles of fragments per 16 instructions (16 K
steps' worth of 8 x 8 x 4 work: 32 instructions and 48 fragment loads with m8n8k4).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..global_.read.async_loader import ChunkLoader
from ..global_.pipelined import PipelinedGlobalMatmul
from ..global_.write.writers import PairedWriter
from ..problem import MatmulProblem
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.dmma import DmmaTile
from .base import Algorithm, distinct, register
from .pipelined import pipelined_preset


def _cubes(problem: MatmulProblem, stage_m: int, stage_n: int) -> int:
    return problem.batch * -(-problem.m // stage_m) * -(-problem.n // stage_n)


def tile_shape(dialect: Dialect) -> dict:
    """The f64 instruction a device runs best: m16n8k8 on sm_90+ (the H100 issues m8n8k4 at about
    half its FP64 tensor rate), m8n8k4 before."""
    cc = dialect.device.compute_capability or (0, 0)
    return dict(tile_m=16, tile_k=8) if cc >= (9, 0) else dict(tile_m=8, tile_k=0)


def _partition(plane_m: int, plane_n: int, shape: dict) -> dict:
    return dict(partition_m=plane_m // shape["tile_m"], partition_n=plane_n // 8, **shape)


#: simple_dmma candidates (planes_m, planes_n, plane_m, plane_n), largest stage first:
#: 128 x 64, 64 x 64 (4 planes of 32 x 32), 32 x 32 (4 planes of 16 x 16).
_SIMPLE_CANDIDATES = [(4, 2, 32, 32), (2, 2, 32, 32), (2, 2, 16, 16)]


def select_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """The largest candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    for plm, pln, wm, wn in _SIMPLE_CANDIDATES:
        if _cubes(problem, plm * wm, pln * wn) >= sms:
            break
    return dict(planes_m=plm, planes_n=pln, stage_k=16, **_partition(wm, wn, tile_shape(dialect)))


#: pipelined_dmma candidates (planes_m, planes_n, plane_m, plane_n, stage_k, stages), largest stage
#: first, per architecture. sm_80 (m8n8k4): 128 x 128 (8 planes of 64 x 32), 128 x 64 (4 planes of
#: 64 x 32), 64 x 64 (4 planes of 32 x 32, 4 slots). sm_90 (m16n8k8), from bench/sweep_dmma_tilings.py
#: on the H100 (h100_2026-11-25_sweep_dmma_tilings.json): 128 x 64 in 3 slots ran 0.91-0.95x cuBLAS at
#: 2048^3 / 4096^3 against 0.78-0.82x for every 128 x 128 (eight planes share the SM's FP64 tensor
#: units no faster than four, and three 73 KiB cubes fit an SM where 128 x 128 fits two).
#: sm_90 adds 32 x 64 (4 planes of 16 x 32, 4 slots), the tile cuBLAS runs below 2048^3.
_PIPELINED_CANDIDATES = {
    (8, 0): [(2, 4, 64, 32, 16, 3), (2, 2, 64, 32, 16, 3), (2, 2, 32, 32, 16, 4)],
    (9, 0): [(2, 2, 64, 32, 16, 3), (2, 2, 32, 32, 16, 4), (2, 2, 16, 32, 16, 4)],
}
#: Cubes of each sm_90 candidate an H100 multiprocessor holds (ptxas: 254 / 168 / 118 registers of
#: 128 units with carried fragments; 88 / 77 / 56 KiB of ring), and the rule between them, from
#: kernel times on the H100 (bench/results/h100_2026-11-25_kernel_durations_f64_small_tiles.json,
#: us, 128 x 64 / 64 x 64 / 32 x 64 / cuBLAS): 512^3 13.6 / 13.6 / 9.2 / 8.0; 768^3 32.6 / 32.5 /
#: 28.3 / 24.1; 1000^3 - / 50.4 / 55.8 / 40.9; 1536^3 177.8 / 146.1 / 189.0 / 135.0; 2048^3 306.3 /
#: 301.2 / 404.3 / 281.7; 3000^3 1249 / 1128 / 1587 / 878; 4096^3 2293 / 2548 / 4299 / 2209. 32 x 64
#: while 64 x 64 tiles number under 1.5 waves of multiprocessors; else 64 x 64 where its waves are
#: fuller than 128 x 64's by 5 points or more (the whole waves' share of its resident cubes).
_SM90_RESIDENT = (2, 3, 4)
_SM90_SMALL_WAVES, _SM90_FULLER = 1.5, 0.05


def _pipelined_candidates(dialect: Dialect) -> list[tuple]:
    cc = dialect.device.compute_capability or (8, 0)
    return _PIPELINED_CANDIDATES[(9, 0) if cc >= (9, 0) else (8, 0)]


def pipelined_dmma_presets(dialect: Dialect, problem: MatmulProblem | None = None) -> list[dict]:
    """The candidates as selections; on sm_90+ with carried fragments (the step's barrier before its
    last k tile, the next slot's first fragments loaded under that k tile's DMMAs), which took the
    128 x 64 kernel from 0.90 to 1.03x cuBLAS at 2048^3 on the H100 (same tile as cuBLAS's
    sm90_xmma_gemm_f64f64_..._tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8, which ran 91% SM
    throughput against our 77% before; h100_2026-11-25_f64_carried_fragments.md). Not measured on
    sm_80, which keeps the plain ring. Nor where an operand takes 8-byte copies (a leading dimension
    or offset of an odd number of doubles): their extra addresses on top of the second fragment set
    spill (56-84 bytes at 4093^3)."""
    shape, presets = tile_shape(dialect), []
    cc = dialect.device.compute_capability or (8, 0)
    chunks = problem is None or min(problem.lhs_align, problem.rhs_align) >= 2
    more = {"carry_fragments": True} if cc >= (9, 0) and chunks else {}
    for plm, pln, wm, wn, sk, stages in _pipelined_candidates(dialect):
        part = _partition(wm, wn, shape)
        presets.append(pipelined_preset(plm, pln, part.pop("partition_m"), part.pop("partition_n"), sk, stages,
                                        **part, **more))
    return presets


def select_pipelined_dmma_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    """sm_90: by the waves of each candidate's tiles (`_SM90_RESIDENT`); other devices: the largest
    candidate stage whose grid gives every multiprocessor a cube (the last otherwise)."""
    sms = max(1, dialect.device.compute_units)
    presets, candidates = pipelined_dmma_presets(dialect, problem), _pipelined_candidates(dialect)
    tiles = [_cubes(problem, plm * wm, pln * wn) for plm, pln, wm, wn, _, _ in candidates]
    if dialect.device.compute_capability == (9, 0):     # the residency counts are the H100's
        if tiles[1] < _SM90_SMALL_WAVES * sms:
            return presets[2]
        full = [t / (-(-t // (sms * r)) * sms * r) for t, r in zip(tiles, _SM90_RESIDENT)]
        return presets[1] if full[1] >= full[0] + _SM90_FULLER else presets[0]
    for preset, count in zip(presets, tiles):
        if count >= sms:
            break
    return preset


@register
class SimpleDmmaAlgorithm(Algorithm):
    name = "simple_dmma"
    selection_name = "DmmaSelection"
    tile = DmmaTile
    stage = PlanePartitionedStage

    def select(self, problem, dialect):
        return select_dmma_tiling(problem, dialect)


@register
class PipelinedDmmaAlgorithm(Algorithm):
    name = "pipelined_dmma"
    selection_name = "PipelinedDmmaSelection"
    tile = DmmaTile
    stage = PlanePartitionedStage
    global_ = PipelinedGlobalMatmul
    lhs_loader = ChunkLoader
    rhs_loader = ChunkLoader
    writer = PairedWriter

    def select(self, problem, dialect):
        return select_pipelined_dmma_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return distinct([self.select(problem, dialect)] + pipelined_dmma_presets(dialect, problem))

    def yield_to(self, chosen, overrides):
        """Carried fragments go with the ring and stage the preset chose: a caller who sets the
        stages, the stage's k, the tile's k or fragment buffering gets the plain ring unless they
        ask for carry_fragments too (what they set may not carry: two slots, an odd k-tile count)."""
        if "carry_fragments" not in overrides and {"stages", "stage_k", "tile_k", "fragment_buffering"} & set(overrides):
            return {k: v for k, v in chosen.items() if k != "carry_fragments"}
        return chosen


#: The DMMA algorithms' tilings: plane selections of the 8 x 8 x 4 float64 tile (plus the ring
#: depth for the pipelined one).
DmmaSelection = SimpleDmmaAlgorithm.selection_class
PipelinedDmmaSelection = PipelinedDmmaAlgorithm.selection_class
