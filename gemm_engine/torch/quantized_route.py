"""`Engine.quantized_matmul` on torch tensors that need torch's machinery (route.py sends them
here). A `QuantizedWeight` is no tensor, so no registered op carries it; instead:

* autocast: x, c and bias are cast to autocast's dtype first (float tensors on autocast's device),
  as torch's linear casts its input;
* x or bias requiring grad: an autograd.Function whose forward is the engine's quantized product
  and whose backward gives ``gx = gy @ W^T`` (W dequantized on the host, multiplied by the engine,
  as QuantizedLinear's backward; the weight takes no gradient) and ``gbias`` (gy summed over the
  rows); only a column bias may join the product there;
* torch.compile: the call is a graph break (`torch.compiler.disable`): it runs eagerly between
  the compiled regions (``fullgraph=True`` reports it rather than tracing into the engine).
"""
from __future__ import annotations

import torch

from .ops import autocast_cast


class QuantizedProduct(torch.autograd.Function):
    """``x @ W + bias`` by the engine's quantized kernels, with the gradients of x and bias."""

    @staticmethod
    def forward(ctx, x, bias, qweight, engine, algorithm):
        ctx.qweight, ctx.engine, ctx.has_bias = qweight, engine, bias is not None
        return engine.run_call(x.detach(), qweight, None, 1.0, None, None, None if bias is None else bias.detach(),
                               -1, None, None, "same_kind", algorithm, None, False, None, None, None)

    @staticmethod
    def backward(ctx, gy):
        gx = gbias = None
        if ctx.needs_input_grad[0]:
            w = torch.from_numpy(ctx.qweight.dequantize()).to(device=gy.device, dtype=gy.dtype)     # (K, N)
            gx = ctx.engine.matmul(gy, w.mT)
        if ctx.has_bias and ctx.needs_input_grad[1]:
            gbias = gy.reshape(-1, gy.shape[-1]).sum(0)
        return gx, gbias, None, None, None


def _routed(engine, x, qweight, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm):
    device = x.device.type
    if torch.is_autocast_enabled(device):
        x, c, bias = (autocast_cast(t, device) for t in (x, c, bias))
    if not (torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (x, c, bias))):
        return engine.run_call(x, qweight, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting,
                               algorithm, None, False, None, None, None)
    if not (out is None and c is None and beta is None and activation is None and out_dtype is None
            and type(alpha) in (int, float) and alpha == 1 and casting == "same_kind" and bias_axis in (-1, 1)):
        raise ValueError("quantized_matmul: on tensors that require grad a quantized product takes a column bias "
                         "and no other epilogue term (out, c, beta, alpha, bias_axis, activation, out_dtype, "
                         "casting): their gradients are not built; apply them after, or detach")
    if bias is not None and not isinstance(bias, torch.Tensor):
        bias = torch.as_tensor(bias, dtype=x.dtype, device=x.device)
    return QuantizedProduct.apply(x, bias, qweight, engine, algorithm)


#: What route.py calls: a graph break under torch.compile (the module docstring).
routed_quantized = torch.compiler.disable(_routed)
