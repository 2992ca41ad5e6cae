"""``quantized_wgmma``: quantized weights past decode sizes on Hopper, dequantized into wgmma's
register operand (global_/quantized_wgmma.py: the product transposed, the weights as A built in
registers from their packed words, x as B in swizzled shared memory), so that no 16-bit copy of
the weight is ever written; ``quantized_wgmma_split_k`` under the one-launch split-K batch level
(batch/split_k_fixup.py) where the output's tiles alone leave multiprocessors idle. CUDA sm_90a,
16-bit activations, either packed layout (k_packed or prepacked).
"""
from __future__ import annotations

from ..batch.split_k_fixup import SplitKFixupBatchMatmul
from ..global_.quantized_wgmma import QuantizedWgmmaGlobalMatmul
from ..selector.quantized_wgmma import split_preset, wgmma_preset
from .base import Algorithm, register


@register
class QuantizedWgmmaAlgorithm(Algorithm):
    name = "quantized_wgmma"
    selection_name = "QuantizedWgmmaSelection"
    # No tile, stage, loaders or writer: the global level copies x and the packed words itself.
    tile = stage = lhs_loader = rhs_loader = writer = None
    global_ = QuantizedWgmmaGlobalMatmul

    #: Whether cubes of up to 128 rows take two warpgroups and the producer (selector/quantized_wgmma.py
    #: `NARROW_PRODUCER`): measured on dense problems; the grouped variant keeps one warpgroup.
    narrow_producer = True

    def select(self, problem, dialect):
        return wgmma_preset(problem, dialect, self.narrow_producer)


#: The level's knobs (tokens, warpgroups, a_tiles, stages, block_k, k_split, a_buffers) and the
#: batch level's.
QuantizedWgmmaSelection = QuantizedWgmmaAlgorithm.selection_class


@register
class QuantizedWgmmaSplitKAlgorithm(QuantizedWgmmaAlgorithm):
    name = "quantized_wgmma_split_k"
    selection_name = "QuantizedWgmmaSplitKSelection"
    batch = SplitKFixupBatchMatmul

    def select(self, problem, dialect):
        return split_preset(problem, dialect)
