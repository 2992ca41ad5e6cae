"""``auto``: the engine's default choice, the fastest composition that sets up for the problem.

In order: ``skinny`` (M = 1 or N = 1 only: a bandwidth-bound vector-matrix or matrix-vector
product, which a tiled kernel runs with one of its 64-128 tile rows used), ``split_k`` (only for
a long K against a small output: see algorithms/split_k.py), ``pipelined_wgmma``
(Hopper sm_90a, float16 / bfloat16), ``pipelined_mma`` (CUDA sm_80+,
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
from .skinny import SkinnyAlgorithm
from .split_k import SplitKWhenWorthIt
from .wgmma import PipelinedWgmmaAlgorithm


@register
class AutoAlgorithm(AlgorithmFamily):
    name = "auto"
    variants = (SkinnyAlgorithm, SplitKWhenWorthIt, PipelinedWgmmaAlgorithm, PipelinedMmaAlgorithm,
                PipelinedDmmaAlgorithm, SimpleUnitAlgorithm)
