"""The deliver step: the result as the caller gets it back.

`finish` hands the array the kernels wrote (call/arguments.py `Target`) back in the caller's
library (torch in, torch out; numpy in, numpy out; np.matrix in, np.matrix out), or copies it into
``out`` where the kernels could not write ``out`` itself. Calls with nothing to multiply (an empty
output, K = 0) are finished here without a kernel (`without_kernel`).
"""
from __future__ import annotations

import numpy as np

from ..tensors import host_tensor
from .arguments import Target
from .arrays import CallArrays, ListArrays
from .request import Request


def finish(runtime, arrays: CallArrays, request: Request, target: Target):
    """The call's return value once the kernels wrote ``target``."""
    out, dtype = request.out, request.dtype
    if arrays.host:
        result = runtime.to_host(target.array)
        if result.dtype != dtype:
            result = result.view(dtype)
        if out is None:
            return _host_result(result, arrays, runtime)
        out.array[...] = result
        return out.original
    if out is None:
        return target.returned
    if not target.direct:
        runtime.copy_into(out.array, target.array)
        runtime.record(out.array)
    return out.original


def _host_result(result: np.ndarray, arrays: CallArrays, runtime):
    """A host result in the caller's library: numpy returns a scalar, not a 0-d array, for
    vector @ vector, and an ndarray subclass (np.matrix) for such inputs."""
    if result.ndim == 0:
        result = result[()]
    elif arrays.subtype is not None:
        result = result.view(arrays.subtype)
    return result if arrays.like is None else host_tensor(result, arrays.like.original.device)


def without_kernel(runtime, arrays: CallArrays, request: Request):
    """The result of a call with nothing to multiply: empty; zeros when K = 0, through the epilogue
    (computed on the host in float64: a kernel would only read c and bias)."""
    shape = request.shape
    value = np.zeros(shape.out_shape)
    if shape.k == 0 and shape.batch and shape.m and shape.n and not request.epilogue.identity:
        # The GEMM's (batch..., M, N) pre-activation (N: b's columns, a gated activation's pairs too).
        value = np.zeros(shape.batch_shape + (shape.m, shape.n))
        if request.c is not None:
            c = runtime.download(request.c.array, request.c.dtype).astype(np.float64)
            value = value + request.beta * c.reshape(_unsqueezed(c.shape, shape))
        if request.bias is not None:
            vec = runtime.download(request.bias.array, request.bias.dtype).astype(np.float64)
            value = value + (vec if request.bias_axis == 1 else vec[:, None])
        if request.activation is not None:
            try:
                value = request.activation.reference(value)
            except NotImplementedError:
                raise NotImplementedError(
                    f"matmul: K = 0, so the result is activation {request.activation.name!r} of the epilogue's "
                    f"terms, computed on the host with its numpy `reference`, which it does not define") from None
        if request.mul is not None:
            mul = runtime.download(request.mul.array, request.mul.dtype).astype(np.float64)
            values = value.shape[:-1] + (shape.value_shape[-1] if not shape.rhs_vector else 1,)
            factor = np.broadcast_to(mul.reshape(_unsqueezed(mul.shape, shape)), values)
            value = value * (np.repeat(factor, 2, axis=-1) if values[-1] != value.shape[-1] else factor)
        value = value.reshape(shape.out_shape)
    return _deliver_host(runtime, arrays, request, np.asarray(value).astype(request.dtype))


def _unsqueezed(term_shape, shape) -> tuple:
    """A term's shape (broadcasting to the output's) with the axes a 1-D operand removed put back,
    so it broadcasts to the GEMM's (batch..., M, N)."""
    full = tuple(term_shape)
    if shape.rhs_vector:
        full = full + (1,)
    if shape.lhs_vector and full:
        full = full[:-1] + (1,) + full[-1:]
    return full


def _deliver_host(runtime, arrays: CallArrays, request: Request, result: np.ndarray):
    """A host result as the call returns it: into ``out``, or in the caller's library."""
    out = request.out
    if out is not None:
        if out.host:
            out.array[...] = result
        else:
            values = runtime.upload(np.asarray(result).astype(out.dtype))
            runtime.copy_into(out.array, values.view(out.array.dtype))
        return out.original
    if arrays.host:
        return _host_result(result, arrays, runtime)
    if arrays.like is not None:
        return host_tensor(result, arrays.like.original.device)
    return runtime.upload(result)


def finish_list(runtime, arrays: ListArrays, request: Request, target: Target) -> list:
    """A list-layout grouped call's results: each group's m x n product, a view of the packed
    result in the caller's library, or copied into its ``out``."""
    host = runtime.to_host(target.array) if arrays.host else None
    if host is not None and host.dtype != request.dtype:
        host = host.view(request.dtype)
    results, offset = [], 0
    for i, (m, gemm_n, _) in enumerate(request.sizes):
        n = request.epilogue.out_columns(gemm_n)
        span = slice(offset, offset + m * n)
        offset += m * n
        part = (host if host is not None else target.array)[span].reshape(m, n)
        if arrays.out is None:
            results.append(_host_result(part, arrays, runtime) if host is not None
                           else target.returned[span].reshape(m, n))
            continue
        out = arrays.out[i]
        if out.host:
            out.array[...] = part if host is not None else runtime.download(part, request.dtype)
        else:
            runtime.copy_into(out.array, part)
            runtime.record(out.array)
        results.append(out.original)
    return results
