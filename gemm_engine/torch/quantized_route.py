"""`Engine.quantized_matmul` on torch tensors that need torch's machinery (route.py sends them
here). A `QuantizedWeight` is no tensor, so no registered op carries it; instead:

* autocast: x, c and bias are cast to autocast's dtype first (float tensors on autocast's device),
  as torch's linear casts its input;
* x or bias requiring grad: an autograd.Function whose forward is the engine's quantized product
  and whose backward gives ``gx = gy @ W^T`` (W expanded on gy's device, dequantize.py, multiplied by the engine,
  as QuantizedLinear's backward; the weight takes no gradient) and ``gbias`` (gy summed over the
  rows); only a column bias may join the product there;
* torch.compile: the call is a graph break (`torch.compiler.disable`): it runs eagerly between
  the compiled regions (``fullgraph=True`` reports it rather than tracing into the engine).

`grouped_matmul` with a `QuantizedExperts` ``b`` comes here the same way (`routed_any_grouped`):
x, bias and row_scale differentiable, through a built-in activation (SwiGLU...), the backward's
products grouped.py's.
"""
from __future__ import annotations

import torch

from ..quant.experts import QuantizedExperts
from .dequantize import dequantized_weight
from .grouped import grouped_grads, routed_grouped
from .gates import differentiable_activation
from .ops import activation_key, activation_of, autocast_cast, engine_handle


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
            if gy.device.type == "cuda" and ctx.engine.runtime.backend == "cuda":
                # W^T through the dequantizing pass (`TransposedQuantizedWeight`): its words where they lie
                gx = ctx.engine.run_call(gy, ctx.qweight.T, None, 1.0, None, None, None, -1, None, None,
                                         "same_kind", None, None, False, None, None, None)
            else:
                w = dequantized_weight(ctx.qweight, gy.device, gy.dtype, ctx.engine)     # (K, N), on the device
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


class QuantizedGroupedProduct(torch.autograd.Function):
    """``grouped_matmul(x, experts, ...)`` with a column bias and a routing weight per row, by the
    engine's quantized grouped kernels, with the gradients of x, bias and row_scale: grouped.py's
    formulas with the experts expanded on the device (dequantize.py) for the backward's products (as
    QuantizedProduct's); the experts take no gradient."""

    @staticmethod
    def forward(ctx, x, bias, row_scale, experts, offsets, counts, engine, algorithm, precision, activation):
        ctx.save_for_backward(x, bias, row_scale, offsets, counts)
        ctx.experts, ctx.engine, ctx.precision, ctx.activation = experts, engine, precision, activation
        detached = (None if t is None else t.detach() for t in (bias, row_scale))
        return engine.run_grouped(x.detach(), experts, offsets, counts, algorithm, precision, None, 1.0, None, None,
                                  next(detached), -1, activation_of(activation), next(detached), None, "same_kind",
                                  None, None)

    @staticmethod
    def backward(ctx, gy):
        x, bias, row_scale, offsets, counts = ctx.saved_tensors
        need = ctx.needs_input_grad
        w = dequantized_weight(ctx.experts, gy.device, gy.dtype, ctx.engine)      # (E, K, N), on the device
        ga, _, gbias, gscale = grouped_grads(x, w, offsets, counts, bias, row_scale, gy, (need[0], False) + need[1:3],
                                             (engine_handle(ctx.engine), None, ctx.precision or ""), ctx.activation)
        return ga, gbias, gscale, None, None, None, None, None, None, None


def _routed_grouped(engine, x, experts, offsets, counts, algorithm, precision, out, alpha, beta, c, bias, bias_axis,
                    activation, row_scale, out_dtype, casting, scale_a, scale_b):
    device = x.device.type
    if torch.is_autocast_enabled(device):
        x, c, bias = (autocast_cast(t, device) for t in (x, c, bias))
    if not (torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                            for t in (x, c, bias, row_scale))):
        return engine.run_grouped(x, experts, offsets, counts, algorithm, precision, out, alpha, beta, c, bias,
                                  bias_axis, activation, row_scale, out_dtype, casting, scale_a, scale_b)
    key = activation_key(activation)
    if not (out is None and c is None and beta is None and out_dtype is None and differentiable_activation(key)
            and scale_a is None and scale_b is None and type(alpha) in (int, float) and alpha == 1
            and casting == "same_kind" and bias_axis in (-1, 1)):
        raise ValueError("grouped_matmul: on tensors that require grad, quantized experts take a column bias, "
                         "row_scale and a built-in activation and no other epilogue term (out, c, beta, alpha, "
                         "bias_axis, scales, out_dtype, casting): their gradients are not built; apply them after, "
                         "or detach")
    bias, row_scale = (t if t is None or isinstance(t, torch.Tensor) else torch.as_tensor(t, device=x.device)
                       for t in (bias, row_scale))
    return QuantizedGroupedProduct.apply(x, bias, row_scale, experts, offsets, counts, engine, algorithm, precision,
                                         key)


#: `QuantizedExperts` through torch's machinery: a graph break under torch.compile too.
routed_quantized_grouped = torch.compiler.disable(_routed_grouped)


def routed_any_grouped(engine, a, b, offsets, counts, algorithm, precision, *epilogue):
    """What `Engine.grouped_matmul` calls for torch tensors that need torch's machinery: quantized
    experts here (no tensor, so no op carries them), every other ``b`` by grouped.py's op."""
    route = routed_quantized_grouped if isinstance(b, QuantizedExperts) else routed_grouped
    return route(engine, a, b, offsets, counts, algorithm, precision, *epilogue)
