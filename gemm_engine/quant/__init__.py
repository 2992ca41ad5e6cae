"""Quantized weights: the format kernels read (format.py), the host-side `QuantizedWeight`
(weight.py), `quantize` from float weights (quantize.py), GPTQ and AWQ checkpoints
(checkpoints.py), a mixture-of-experts layer's stacked weights (experts.py), and the bit work
they share (codes.py). The kernels that read them are a loader
(global_/read/dequantizing_loader.py) and a decode global level (global_/quantized_decode.py);
`gemm_engine.quantized_matmul` runs them."""
from .checkpoints import AWQ_ORDER, from_awq, from_gptq
from .experts import QuantizedExperts
from .format import KINDS, WeightFormat
from .quantize import quantize
from .weight import DeviceWeight, QuantizedWeight

__all__ = ["AWQ_ORDER", "DeviceWeight", "KINDS", "QuantizedExperts", "QuantizedWeight", "WeightFormat", "from_awq",
           "from_gptq", "quantize"]
