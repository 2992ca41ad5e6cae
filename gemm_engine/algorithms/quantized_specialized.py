"""``quantized_specialized_wgmma``: quantized weights on the Hopper warp-specialized kernel, the
packed words converted in shared memory by the producer warpgroup (global_/tma_converting.py,
global_/read/converting_loader.py) for consumers that run the dense kernel's wgmma loop: the
Specialized algorithm with its rhs loader, global level and batch level swapped, its tile, stage,
lhs loader and writer unchanged. CUDA sm_90a, float16 / bfloat16 activations, prepacked weights
(int4, int8, fp8 e4m3; groups dividing or multiples of 64 rows), every epilogue of the dense kernel.
"""
from __future__ import annotations

from ..batch.dequantize_first import dense_view
from ..batch.tma_quantized import TmaQuantizedBatchMatmul
from ..global_.read.converting_loader import ConvertingLoader
from ..global_.tma_converting import TmaConvertingGlobalMatmul
from ..selector.quantized_specialized import converting_tiling, fit_ring, whole_strips
from .base import register
from .specialized_wgmma import SpecializedWgmmaAlgorithm, named_tile


@register
class QuantizedSpecializedWgmmaAlgorithm(SpecializedWgmmaAlgorithm):
    name = "quantized_specialized_wgmma"
    selection_name = "QuantizedSpecializedWgmmaSelection"
    global_ = TmaConvertingGlobalMatmul
    rhs_loader = ConvertingLoader
    batch = TmaQuantizedBatchMatmul

    def select(self, problem, dialect):
        if problem.weights is None:
            return super().select(problem, dialect)
        chosen = converting_tiling(problem, dialect)
        shape = named_tile(chosen, self.overrides)      # slots of packed words and staging for a named tile
        return chosen if shape is None else {**chosen, **fit_ring(problem, dialect, shape)}

    def tuning_space(self, problem, dialect):
        if problem.weights is None:
            return super().tuning_space(problem, dialect)
        space = super().tuning_space(dense_view(problem), dialect)
        return [{**c, **fit_ring(problem, dialect, c)} for c in space if c.get("cluster_m", 1) == 1 and whole_strips(c)]


QuantizedSpecializedWgmmaSelection = QuantizedSpecializedWgmmaAlgorithm.selection_class
