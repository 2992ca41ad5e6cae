"""`routed`: an `Engine.matmul` call on torch tensors that needs torch's machinery, as a registered op.

`Engine.matmul` sends a call here when a tensor requires grad (grad mode on), under torch.compile's
tracing or autocast, or for tensor subclasses (tensors.py `torch_op_wanted`); every other call
goes straight to the engine (call/fast.py), with no dispatcher in between. Here the call's options
become the op's schema values (gemm_engine/torch/ops.py): numbers for ``c``, ``bias`` and ``mul``
become tensors (numpy's weak-scalar rule: the product's dtype), number scales fold into alpha; the
op is applied through its autograd.Function where an input requires grad (autograd.py `call`).
"""
from __future__ import annotations

import numbers

import torch

from ..call import numpy_rules
from ..tensors import numpy_torch_dtype, torch_numpy_dtype
from ..handles import engine_of
from ..quant.weight import QuantizedWeight
from .autograd import call
from .ops import activation_key, engine_handle, op
from .quantized_route import routed_quantized


def _weak_dtypes() -> dict:
    """(a's dtype, b's dtype) -> the dtype a number given for c / bias / mul takes (numpy's weak
    rule: the product's where it is floating, else float64), for every pair the engine multiplies:
    a table made once, so that torch.compile traces a lookup (it cannot trace numpy's dtypes)."""
    names = ("float32", "float64", "float16", "bfloat16", "int8", "float8_e4m3fn", "float8_e5m2")
    table = {}
    for x in names:
        for y in names:
            tx, ty = getattr(torch, x), getattr(torch, y)
            try:
                product = numpy_rules.product_dtype(torch_numpy_dtype(tx), torch_numpy_dtype(ty))
            except TypeError:
                continue
            table[tx, ty] = numpy_torch_dtype(product) if product.kind == "f" else torch.float64
    return table


_WEAK = _weak_dtypes()


def _tensor(x, a, b):
    """A number given for c / bias / mul as a tensor of the product's dtype on a's device."""
    if x is None or isinstance(x, torch.Tensor):
        return x
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return torch.tensor(float(x), dtype=_WEAK.get((a.dtype, b.dtype), torch.float64), device=a.device)
    return torch.as_tensor(x, device=a.device)


def _requires_grad(*xs) -> bool:
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in xs)


def routed(engine, a, b, *, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm,
           precision, tune, scale_a, scale_b, mul):
    """``engine.matmul(a, b, ...)`` through ``torch.ops.gemm_engine.*`` (see the module docstring;
    ``engine`` None: the default engine, made only where the call runs)."""
    if type(b) is QuantizedWeight:     # no tensor, so no op carries it: quantized_route.py
        return routed_quantized(engine or engine_of(0), a, b, out, alpha, beta, c, bias, bias_axis, activation,
                                out_dtype, casting, algorithm)
    if not isinstance(a, torch.Tensor):
        a = torch.as_tensor(a, device=b.device)
    if not isinstance(b, torch.Tensor):
        b = torch.as_tensor(b, device=a.device)
    grad = _requires_grad(a, b, c, bias, mul, scale_a, scale_b)
    if out is not None:
        if grad or torch.compiler.is_compiling():
            raise RuntimeError("gemm_engine.matmul: out= is not supported on tensors that require grad or under "
                               "torch.compile (the op returns a new tensor); assign the result instead")
        return (engine or engine_of(0)).compute(a.detach(), b.detach(), out=out, alpha=alpha, beta=beta, c=c, bias=bias,
                              bias_axis=bias_axis, activation=activation, out_dtype=out_dtype, casting=casting,
                              algorithm=algorithm, precision=precision, tune=tune, scale_a=scale_a,
                              scale_b=scale_b, mul=mul)
    if algorithm is not None and not isinstance(algorithm, str):
        raise TypeError(f"gemm_engine.matmul: on tensors that require grad, under torch.compile or autocast the "
                        f"algorithm must be a registered name (got {type(algorithm).__name__}); register it "
                        f"(gemm_engine.register)")
    if tune and not torch.compiler.is_compiling():
        (engine or engine_of(0)).tune(a.detach(), b.detach(), precision=precision)
    handle, precision = engine_handle(engine), precision or ""
    key = activation_key(activation)
    if not isinstance(bias_axis, int) or isinstance(bias_axis, bool):
        raise ValueError(f"matmul: bias_axis must be -1 or 1 (one value per output column) or 0 or -2 "
                         f"(per output row), got {bias_axis!r}")
    if not (isinstance(alpha, numbers.Real) and not isinstance(alpha, bool)):
        raise TypeError(f"matmul: alpha must be a real number, got {type(alpha).__name__}")
    out_dtype = _torch_dtype(out_dtype)
    if scale_a is not None or scale_b is not None:
        if grad:
            raise RuntimeError("gemm_engine.matmul: a scaled product (scale_a / scale_b: fp8 or int8 operands with "
                               "their dequantizing scales) has no gradient; detach its inputs, or train in a float "
                               "dtype and quantize for inference")
        if c is not None or mul is not None:
            raise ValueError("gemm_engine.matmul: c and mul are not supported with scales through the torch ops")
        factor = float(alpha)
        tensors = []
        for s in (scale_a, scale_b):
            if isinstance(s, numbers.Real) and not isinstance(s, bool):
                factor *= float(s)
                s = None
            tensors.append(s)
        return op("scaled_matmul")(a, b, *tensors, factor, _tensor(bias, a, b), bias_axis, key, out_dtype,
                                   casting, handle, algorithm, precision)
    if (c is None and bias is None and mul is None and not key and out_dtype is None and beta is None
            and alpha == 1 and casting == "same_kind"):
        return call("matmul", a, b, handle, algorithm, precision)
    c, bias, mul = (_tensor(x, a, b) for x in (c, bias, mul))
    beta = (1.0 if c is not None else 0.0) if beta is None else float(beta)
    return call("matmul_fused", a, b, c, bias, mul, float(alpha), beta, bias_axis, key, out_dtype, casting, handle,
                algorithm, precision)


def _torch_dtype(dtype):
    """``out_dtype`` (a torch dtype, numpy dtype or name) as a torch dtype, or None."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    return numpy_torch_dtype(numpy_rules.check_out_dtype(dtype))
