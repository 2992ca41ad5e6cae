"""The fallback of calls whose operands' scales no kernel applies (scales per block of 128 along K
where no level applies them): the operands multiplied by their scales first, in their own library."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..epilogue.scales import dequantize
from .arrays import CallArrays, import_array
from .request import Request


def dequantized(runtime, arrays: CallArrays, request: Request) -> tuple[CallArrays, Request]:
    """The call with its operands multiplied by their scales in float32, in their own library
    (torch tensors by torch on their device, everything else through the host): the fallback where
    no kernel applies block scales."""
    shape = request.shape
    out = []
    for imp, scale, lhs in ((arrays.a, request.lhs_scale, True), (arrays.b, request.rhs_scale, False)):
        label = "a" if lhs else "b"
        host_scale = None if scale is None else runtime.download(scale.array.array, scale.array.dtype)
        if imp.library == "torch":
            import torch
            device = imp.original.device
            values = None if scale is None else torch.as_tensor(np.asarray(host_scale, np.float32), device=device)
            scaled = dequantize(imp.original, scale, values, lhs, shape.k, shape.n, torch)
        else:
            scaled = dequantize(runtime.download(imp.array, imp.dtype), scale, host_scale, lhs, shape.k, shape.n, np)
            # Device operands stay device arrays (their result too), host ones host arrays.
            scaled = scaled if imp.host else runtime.upload(np.ascontiguousarray(scaled))
        out.append(import_array(scaled, label, runtime))
    return replace(arrays, a=out[0], b=out[1]), request.dequantized()


__all__ = ["dequantized"]
