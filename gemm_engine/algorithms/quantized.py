"""Quantized weights (gemm_engine/quant) through the dequantizing loader: the dense compositions with
their rhs loader swapped for `DequantizingLoader`, which writes the weights' values into the same
k-major shared memory the stage reads (global_/read/dequantizing_loader.py).

* ``quantized_simple_unit``: register FMA on every backend, any activation type the call accepts
  (float16, bfloat16, float32), the weights' values exact in float32: the portable path;
* ``quantized_double_buffering_mma``: mma.sync tiles (CUDA sm_80+, 16-bit activations), the
  weights rounded once to the activations' type, the next stage's loads spread between tile
  matmuls: the tensor-core path for prefill sizes;
* ``quantized_simple_mma``: the same tiles on the simple pipeline (unranked).

The decode regime (M <= 64) has a global level of its own: algorithms/quantized_decode.py.
"""
from __future__ import annotations

from ..global_.read.dequantizing_loader import DequantizingLoader
from ..selector.unit import select_unit_tiling
from .accelerated import SimpleMmaAlgorithm
from .base import register
from .double_buffering import DoubleBufferingMmaAlgorithm
from .simple import SimpleUnitAlgorithm


@register
class QuantizedSimpleUnitAlgorithm(SimpleUnitAlgorithm):
    name = "quantized_simple_unit"
    rhs_loader = DequantizingLoader

    def select(self, problem, dialect):
        return select_unit_tiling(problem, dialect)


@register
class QuantizedSimpleMmaAlgorithm(SimpleMmaAlgorithm):
    name = "quantized_simple_mma"
    rhs_loader = DequantizingLoader


@register
class QuantizedDoubleBufferingMmaAlgorithm(DoubleBufferingMmaAlgorithm):
    name = "quantized_double_buffering_mma"
    rhs_loader = DequantizingLoader
