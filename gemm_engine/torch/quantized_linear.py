"""`QuantizedLinear`: nn.Linear over a quantized weight, by `gemm_engine.quantized_matmul`.

Its forward is nn.Linear's, ``(..., in_features) -> (..., out_features)``; the kernels read the
packed codes (gemm_engine/quant), the weight is never materialized in the forward.

The module holds the `QuantizedWeight`'s arrays as buffers, so that ``state_dict``, ``.to(device)``
and ``load_state_dict`` handle them as any module's tensors (on a CUDA device the engine's kernels
read the buffers themselves: the weight is held once there, `QuantizedWeight.device_source`): ``qweight`` (the packed 32-bit words,
as int32 bits), ``scales`` and, for an asymmetric weight, ``zeros`` (16-bit scale words, as int16
bits), with an optional float ``bias`` parameter. Their layout and sizes follow from the
constructor's arguments (format, group size, symmetric, scale dtype, prepacked), which a state_dict
does not hold: build the module the same way before loading one. The `QuantizedWeight` a forward
hands the engine is rebuilt from the buffers only when they moved (``.to``), were loaded
(``load_state_dict``) or `refresh_weight` was called (after changing them in place otherwise: on
CUDA the kernels and the backward's expansion read the buffers themselves and see the new codes
at once; elsewhere the next forward after `refresh_weight` does).

Gradients: the input's (``grad @ W.T`` by the engine on the dequantized weight, expanded from the
buffers on their device by torch/dequantize.py for the backward only) and the bias's flow; the
quantized weight's codes are integers and take none (`requires_grad_` refuses it).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..api import quantized_matmul
from ..quant import QuantizedWeight, quantize
from .dequantize import dequantized
from .ops import autocast_cast
from .quantized_op import forget_weight, format_key, tensor_weight

#: Torch dtypes holding the bits of the weight's numpy arrays (torch lacks unsigned 32/16-bit math).
_BITS = {np.dtype(np.uint32): np.int32, np.dtype(np.uint16): np.int16}


def _bits_tensor(array: np.ndarray, device) -> torch.Tensor:
    return torch.from_numpy(array.view(_BITS[array.dtype]).copy()).to(device)


class QuantizedLinear(nn.Module):
    """``y = x @ W.T + bias`` with W (out_features x in_features) held quantized (module docstring).
    ``format``: "int4", "int8" or "fp8_e4m3"; ``group_size``: rows of in_features per scale (None:
    per output channel); ``symmetric=False``: zero points too; ``scale_dtype``: "float16" or
    "bfloat16"; ``prepacked``: the layout the decode kernels stream best (`QuantizedWeight.prepack`).
    Made empty (an all-zero weight) for ``load_state_dict``, or by `from_linear`."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, format: str = "int4",
                 group_size=128, symmetric: bool = True, scale_dtype: str = "float16", prepacked: bool = True,
                 device=None, dtype=None):
        super().__init__()
        zero = quantize(np.zeros((in_features, out_features), np.float32), format, group_size, symmetric,
                        scale_dtype)
        self.set_weight(zero.prepack() if prepacked else zero, device)
        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype)) if bias else None

    def set_weight(self, q: QuantizedWeight, device=None) -> None:
        """Hold ``q`` (in_features x out_features): its arrays become the buffers (on ``device``),
        its shape and format the module's."""
        self.in_features, self.out_features, self.format = q.k, q.n, q.format
        self.register_buffer("qweight", _bits_tensor(q.packed, device))
        self.register_buffer("scales", _bits_tensor(q.scales, device))
        self.register_buffer("zeros", None if q.zeros is None else _bits_tensor(q.zeros, device))
        # Rebuilt from the buffers by the first forward: its device arrays are then theirs.
        self._cached = ((), None)
        if not getattr(self, "_load_hooked", False):
            self.register_load_state_dict_post_hook(_loaded)
            self._load_hooked = True

    def refresh_weight(self) -> None:
        """Forget the cached `QuantizedWeight`: the next forward reads the buffers again."""
        self._cached = ((), None)
        forget_weight(self.qweight)       # the compiled forward's too (torch/quantized_op.py)

    @classmethod
    def from_linear(cls, linear: nn.Linear, format: str = "int4", group_size=128, symmetric: bool = True,
                    scale_dtype=None, prepacked: bool = True) -> "QuantizedLinear":
        """``linear``'s weight quantized (`gemm_engine.quantize` of ``weight.T``: in_features rows of
        K) and a copy of its bias, on its device. ``scale_dtype`` defaults to the weight's 16-bit
        dtype, else float16."""
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"QuantizedLinear.from_linear: linear must be an nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach()
        q = quantize(w.mT, format, group_size, symmetric, scale_dtype)
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.set_weight(q.prepack() if prepacked else q, w.device)
        new.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        new.train(linear.training)
        return new

    # -- the weight --------------------------------------------------------------------------------
    def _buffer_key(self) -> tuple:
        return tuple((t.device, t.data_ptr()) for t in (self.qweight, self.scales, self.zeros) if t is not None)

    def quantized_weight(self) -> QuantizedWeight:
        """The `QuantizedWeight` (in_features, out_features) the buffers hold (rebuilt when they changed)."""
        key = self._buffer_key()
        if self._cached[1] is None or self._cached[0] != key:
            # The one the compiled forward's op finds too (its device arrays: the buffers).
            self._cached = (key, tensor_weight(self.qweight, self.scales, self.zeros, self.format, self.in_features,
                                               self.out_features))
        return self._cached[1]

    def dequantized_weight(self) -> torch.Tensor:
        """The float32 (out_features, in_features) values the weight stands for, on the buffers' device."""
        return dequantized(self.qweight, self.scales, self.zeros, self.format, self.in_features,
                           self.out_features).T.contiguous()

    def __getattr__(self, name: str):
        if name == "weight":   # nn.Linear's attribute: say why it is missing
            raise AttributeError("QuantizedLinear has no float weight parameter (its weight is quantized: buffers "
                                 "qweight, scales, zeros); dequantized_weight() gives its values")
        return super().__getattr__(name)

    def __getstate__(self):
        # The cached QuantizedWeight holds a lock and device copies: rebuilt from the buffers after a copy.
        state = dict(super().__getstate__())
        state["_cached"] = ((), None)
        return state

    def requires_grad_(self, requires_grad: bool = True) -> "QuantizedLinear":
        if requires_grad:
            raise RuntimeError("QuantizedLinear: the weight is quantized (integer codes) and takes no gradient; "
                               "train the float nn.Linear and quantize after (QuantizedLinear.from_linear), or "
                               "train only the bias (module.bias.requires_grad_())")
        return super().requires_grad_(False)

    # -- forward -----------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1:] != (self.in_features,):
            raise ValueError(f"QuantizedLinear: x's last dimension must be in_features={self.in_features}, got "
                             f"shape {tuple(x.shape)}")
        # quantized_matmul differentiates in x and bias (torch/quantized_route.py), autocast and
        # torch.compile included; F.linear's leading axes are flattened into M.
        lead = x.shape[:-1]
        if torch.compiler.is_compiling():     # traced whole (torch/quantized_op.py), not a graph break
            device, bias = x.device.type, self.bias
            if torch.is_autocast_enabled(device):      # as the eager route casts them
                x, bias = autocast_cast(x, device), autocast_cast(bias, device)
            y = torch.ops.gemm_engine.quantized_mm(x.reshape(-1, x.shape[-1]), self.qweight, self.scales, self.zeros,
                                                   bias, format_key(self.format), self.in_features,
                                                   self.out_features, 0, None)
        else:
            y = quantized_matmul(x.reshape(-1, x.shape[-1]), self.quantized_weight(), bias=self.bias)
        return y.reshape(*lead, y.shape[-1])

    def extra_repr(self) -> str:
        f = self.format
        group = f"group_size={f.group_size}" if f.group_size else "per-channel"
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"format={f.kind}, {group}, {'asymmetric' if f.zeros else 'symmetric'}, {f.layout}")


def _loaded(module: QuantizedLinear, incompatible_keys) -> None:
    """load_state_dict's hook: the buffers were written in place."""
    module.refresh_weight()


__all__ = ["QuantizedLinear"]
