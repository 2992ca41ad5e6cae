"""``auto``: the engine's default choice, the fastest composition that sets up for the problem.

In order: ``skinny_split_k`` (M = 1 or N = 1 with a big operand contiguous along the outputs,
16 MiB or more, and K at least the outputs; CUDA), ``skinny`` (M = 1 or N = 1 only: a bandwidth-bound vector-matrix or matrix-vector
product, which a tiled kernel runs with one of its 64-128 tile rows used), ``split_k`` (only for
a long K against a small output: see algorithms/split_k.py), ``pipelined_wgmma``
(Hopper sm_90a, float16 / bfloat16, float32 with tf32 opted in where any transposing pass it needs
is worth it), ``pipelined_mma`` (CUDA sm_80+,
float16 / bfloat16, float32 with tf32 opted in), ``pipelined_dmma`` (float64 on CUDA sm_80+: FP64
tensor cores, 0.47-0.62x cuBLAS on the H100 against 0.18-0.26x for register FMA,
bench/results/h100_2026-11-21_issue4_probe_f64.md), then ``simple_unit`` (register FMA: every backend
and dtype; its tiling rule picks the vectorized SGEMM shapes on CUDA). The order follows the H100
measurements in bench/results/ (wgmma 0.85x cuBLAS at f16 4096^3 against 0.40-0.45 for mma.sync;
simple_unit 0.89x at f32 4096^3, ahead of double_buffering_unit's 0.81).
"""
from __future__ import annotations

from .base import AlgorithmFamily, register
from .dmma import PipelinedDmmaAlgorithm
from .pipelined import PipelinedMmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .skinny import SkinnyAlgorithm, SkinnySplitWhenWorthIt
from .split_k import SplitKWhenWorthIt
from .wgmma import WgmmaWhenWorthIt


@register
class AutoAlgorithm(AlgorithmFamily):
    name = "auto"
    variants = (SkinnySplitWhenWorthIt, SkinnyAlgorithm, SplitKWhenWorthIt, WgmmaWhenWorthIt,
                PipelinedMmaAlgorithm, PipelinedDmmaAlgorithm, SimpleUnitAlgorithm)


#: Why each member of ``auto`` sits where it does (``engine.explain`` quotes these).
RANKING = {
    "skinny_split_k": "first: M = 1 or N = 1 with a big operand (16 MiB up) contiguous "
                      "along the outputs: K split over a wave of cubes, each reading long "
                      "runs of rows (bf16 1x8192x8192: 0.051 ms against 0.053 in one launch)",
    "skinny": "first: for M = 1 or N = 1 a bandwidth kernel beats any tiled one (one tile row used)",
    "split_k_when_worth_it": "before the tiled kernels: with a long K against a small output, the "
                             "output tiles alone leave compute units idle (64x64x65536 f32: 99x unsplit)",
    "pipelined_wgmma": "the fastest tensor-core kernel on Hopper (f16 4096^3: 0.85x cuBLAS, "
                       "against 0.40-0.45 for mma.sync; tf32 4096^3: 0.80x with its transposing "
                       "pass, against 0.36; the pass only from M, N >= 768)",
    "pipelined_mma": "tensor cores with a cp.async ring on sm_80+ (behind wgmma where wgmma runs)",
    "pipelined_dmma": "float64 tensor cores on sm_80+: 2.6x register FMA on the H100",
    "simple_unit": "register FMA, every backend and dtype: the fallback (f32 4096^3: 0.89x cuBLAS, "
                   "ahead of double_buffering_unit's 0.81)",
}

#: Why a registered algorithm that sets up is not among auto's members.
NOT_RANKED = {
    "double_buffering_unit": "measured behind simple_unit (f32 4096^3 on the H100: 0.81 vs 0.89x cuBLAS)",
    "simple_mma": "tensor cores without the cp.async ring: pipelined_mma / pipelined_wgmma are faster",
    "double_buffering_mma": "tensor cores without the cp.async ring: pipelined_mma / pipelined_wgmma are faster",
    "simple_wmma": "the WMMA API's fragments: pipelined_mma's mma.sync with ldmatrix is faster",
    "simple_dmma": "pipelined_dmma's cp.async ring is faster for float64",
    "ordered": "a composition of the algorithm family, slower than simple_unit in the H100 sweeps",
    "specialized": "a composition of the algorithm family, slower than simple_unit in the H100 sweeps",
}
#: Registered names that are families (aliases choosing among members), not listed on their own.
FAMILY_NOTE = "a family: chooses among its members, which are listed on their own"
