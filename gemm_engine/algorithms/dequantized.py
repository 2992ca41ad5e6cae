"""Quantized weights through the dequantizing pass: each dense algorithm with its batch slot swapped
for the K-major batch level that first expands the packed weight into a dense K-major copy
(batch/dequantize_first.py), its tile, stage, global level, loaders and writer unchanged.

* ``dequantized_specialized_wgmma``: the Hopper warp-specialized TMA kernel (CUDA sm_90a), its
  rhs tensor map describing the copy: the prefill path on Hopper;
* ``dequantized_pipelined_mma``: mma.sync with the cp.async ring (CUDA sm_80+): the prefill path
  before Hopper;
* ``dequantized_pipelined_wgmma``: the wgmma ring without warp specialization (unranked);
* ``dequantized_simple_unit``: register FMA, every backend and activation type (unranked: what
  PoCL checks the pass with; the float32 copy is exact).

Each chooses its tiling for `dense_view` of the problem: the product its kernel runs.
"""
from __future__ import annotations

from ..batch.dequantize_first import DequantizeFirstBatchMatmul, TmaDequantizeFirstBatchMatmul, dense_view
from .base import register
from .pipelined import PipelinedMmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .specialized_wgmma import SpecializedWgmmaAlgorithm
from .wgmma import PipelinedWgmmaAlgorithm


class _DenseTiling:
    """The dense algorithm's tiling rules (its own `select`, so its dispatch choice stands),
    applied to the dense product after the pass."""

    def selection_for(self, problem, dialect):
        return super().selection_for(dense_view(problem) if problem.weights is not None else problem, dialect)

    def tuning_space(self, problem, dialect):
        return super().tuning_space(dense_view(problem) if problem.weights is not None else problem, dialect)


@register
class DequantizedSpecializedWgmmaAlgorithm(_DenseTiling, SpecializedWgmmaAlgorithm):
    name = "dequantized_specialized_wgmma"
    batch = TmaDequantizeFirstBatchMatmul


@register
class DequantizedPipelinedWgmmaAlgorithm(_DenseTiling, PipelinedWgmmaAlgorithm):
    name = "dequantized_pipelined_wgmma"
    batch = DequantizeFirstBatchMatmul


@register
class DequantizedPipelinedMmaAlgorithm(_DenseTiling, PipelinedMmaAlgorithm):
    name = "dequantized_pipelined_mma"
    batch = DequantizeFirstBatchMatmul


@register
class DequantizedSimpleUnitAlgorithm(_DenseTiling, SimpleUnitAlgorithm):
    name = "dequantized_simple_unit"
    batch = DequantizeFirstBatchMatmul
