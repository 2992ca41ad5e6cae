"""``quantized_decode``: quantized weights at decode sizes (M <= 64), streamed once at the bandwidth floor.

The quantized decode global level (global_/quantized_decode.py: dequantized weights as the A
operand of the plane's m16n8k16 product, built in registers from 16-byte loads of the packed
words) under the partitioned batch level; ``quantized_decode_split_k`` under the one-launch split-K
batch level (batch/split_k_fixup.py), which cuts K into ranges of whole groups over more cubes, the
last cube of each tile adding the ranges' partial sums in order, where the output columns alone
give too few cubes to keep every multiprocessor streaming. CUDA sm_80+ on the instruction; OpenCL devices run its emulation
(correct, slow: what PoCL checks the kernel's arithmetic with).
"""
from __future__ import annotations

from ..batch.split_k_fixup import SplitKFixupBatchMatmul
from ..global_.quantized_decode import QuantizedDecodeGlobalMatmul
from .base import Algorithm, register


@register
class QuantizedDecodeAlgorithm(Algorithm):
    name = "quantized_decode"
    selection_name = "QuantizedDecodeSelection"
    # No tile, stage, loaders or writer: the global level reads the weights and x itself.
    tile = stage = lhs_loader = rhs_loader = writer = None
    global_ = QuantizedDecodeGlobalMatmul


#: The decode kernel's knobs (planes, column_loads, unroll) and the batch level's.
QuantizedDecodeSelection = QuantizedDecodeAlgorithm.selection_class


@register
class QuantizedDecodeSplitKAlgorithm(QuantizedDecodeAlgorithm):
    name = "quantized_decode_split_k"
    selection_name = "QuantizedDecodeSplitKSelection"
    batch = SplitKFixupBatchMatmul
