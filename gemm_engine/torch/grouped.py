"""``torch.ops.gemm_engine.grouped_mm``: the engine's grouped GEMM (`Engine.grouped_matmul`) as a
registered torch operator with its gradient, for training mixture-of-experts layers: the layouts
whose extents live on the device, each gradient again a grouped product of the engine (no host
synchronization: a step with new routing replays in a captured CUDA graph).

``grouped_mm(a, b, offsets, counts, engine, algorithm, precision)``:

* contiguous (``offsets``, b 3-D; torch._grouped_mm's 2-D x 3-D form): a (M, K), b (G, K, N) ->
  (M, N); the gradients ``ga = grouped(gy, b^T)`` (contiguous) and ``gb_g = a_g^T gy_g`` (the k
  layout over a's rows of each group; computed in b's own layout);
* masked (``counts``): a (G, C, K), b (G, K, N) -> (G, C, N), rows at or past a count zero; ``ga =
  grouped(gy, b^T)`` (masked: zero past the counts, as those rows' results were constant), ``gb_g =
  a_g[:c]^T gy_g[:c]``: the k layout over every group's C rows with a second group after each for
  its rows past the count, discarded (their product is computed and thrown away: C x G rows of
  work, not the counts');
* k (``offsets``, b 2-D; the weight gradient's form): a (M, K), b (K, N), offsets over K -> (G, M,
  N); ``ga^T = grouped(b, gy^T)`` and ``gb = grouped(a^T, gy)``, both contiguous over K.

The contract is `grouped_matmul`'s (``offsets[-1]`` equal to the grouped extent: rows or columns
past it are not written, forward or backward). Epilogue terms (bias, activation, row scales,
scales) have no gradient here: `Engine.grouped_matmul` refuses them on tensors that require grad.
The fake implementation gives the layout's shape and the engine's result dtype, so torch.compile
traces a call.
"""
from __future__ import annotations

import torch

from ..call import numpy_rules
from ..handles import engine_of
from ..tensors import numpy_torch_dtype, torch_numpy_dtype
from .autograd import FUNCTIONS, differentiable, call
from .ops import LIB, engine_handle, kernel_name, op, plain

SCHEMA = "(Tensor a, Tensor b, Tensor? offsets, Tensor? counts, int engine, str? algorithm, str precision) -> Tensor"


def grouped_impl(a, b, offsets, counts, engine, algorithm, precision):
    return engine_of(engine).grouped_matmul(plain(a), plain(b), offsets=offsets, counts=counts,
                                            algorithm=algorithm or None, precision=precision or None)


def _layout(a, b, offsets, counts) -> str:
    if counts is not None:
        return "masked"
    return "contiguous" if b.dim() == 3 else "k"


def grouped_fake(a, b, offsets, counts, engine, algorithm, precision):
    dtype = numpy_torch_dtype(numpy_rules.product_dtype(torch_numpy_dtype(a.dtype), torch_numpy_dtype(b.dtype)))
    layout = _layout(a, b, offsets, counts)
    if layout == "contiguous":
        shape = (a.shape[0], b.shape[-1])
    elif layout == "masked":
        shape = (a.shape[0], a.shape[1], b.shape[-1])
    else:
        shape = (offsets.shape[0], a.shape[0], b.shape[-1])
    return a.new_empty(shape, dtype=dtype)


def _column_major(t) -> bool:
    return t.stride(-2) == 1 and t.stride(-1) != 1


def _mm(a, b, offsets, counts, options):
    return call("grouped_mm", a, b, offsets, counts, *options)


def _contiguous_grads(a, b, offsets, gy, need, options):
    ga = _mm(gy, b.mT, offsets, None, options).to(a.dtype) if need[0] else None
    gb = None
    if need[1]:
        # gb_g = a_g^T gy_g: a's rows of each group reduced (the k layout), in b's layout.
        gb = (_mm(gy.mT, a, offsets, None, options).mT if _column_major(b)
              else _mm(a.mT, gy, offsets, None, options)).to(b.dtype)
    return ga, gb


def _masked_grads(a, b, counts, gy, need, options):
    ga = _mm(gy, b.mT, None, counts, options).to(a.dtype) if need[0] else None
    gb = None
    if need[1]:
        g, c, k = a.shape
        first = torch.arange(g, device=counts.device, dtype=counts.dtype) * c
        # Group 2i: group i's rows below its count; group 2i + 1: the rest of its rows (discarded).
        ends = torch.stack([first + counts.clamp(0, c), first + c], dim=1).reshape(-1)
        both = _mm(a.reshape(g * c, k).mT, gy.reshape(g * c, gy.shape[-1]), ends, None, options)
        gb = both[0::2].to(b.dtype)
    return ga, gb


def _k_grads(a, b, offsets, gy, need, options):
    # y_g = a[:, lo:hi] @ b[lo:hi]: ga[:, lo:hi] = gy_g b[lo:hi]^T, gb[lo:hi] = a[:, lo:hi]^T gy_g.
    ga = _mm(b, gy.mT, offsets, None, options).mT.to(a.dtype) if need[0] else None
    gb = _mm(a.mT, gy, offsets, None, options).to(b.dtype) if need[1] else None
    return ga, gb


GRADS = {"contiguous": _contiguous_grads, "masked": _masked_grads, "k": _k_grads}


class GroupedMm(torch.autograd.Function):
    """``torch.ops.gemm_engine.grouped_mm`` with its gradient (the module docstring's formulas)."""

    @staticmethod
    def forward(ctx, a, b, offsets, counts, engine, algorithm, precision):
        ctx.save_for_backward(a, b, offsets, counts)
        ctx.options = (engine, algorithm, precision)
        return op("grouped_mm")(a, b, offsets, counts, engine, algorithm, precision)

    @staticmethod
    def backward(ctx, gy):
        a, b, offsets, counts = ctx.saved_tensors
        layout = _layout(a, b, offsets, counts)
        extents = counts if layout == "masked" else offsets
        ga, gb = GRADS[layout](a, b, extents, gy.contiguous(), ctx.needs_input_grad[:2], ctx.options)
        return ga, gb, None, None, None, None, None


for _defined in ("grouped_mm", kernel_name("grouped_mm")):
    LIB.define(_defined + SCHEMA)
    LIB.impl(_defined, grouped_impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"gemm_engine::{_defined}", grouped_fake, lib=LIB)
FUNCTIONS["grouped_mm"] = GroupedMm
LIB.impl("grouped_mm", differentiable(GroupedMm), "Autograd")


def routed_grouped(engine, a, b, offsets, counts, algorithm, precision, *epilogue):
    """`Engine.grouped_matmul` on torch tensors that need torch's machinery (an input requiring grad,
    torch.compile's tracing): through ``grouped_mm``. ``epilogue``: the call's out, alpha, beta, c,
    bias, activation, row_scale, out_dtype, casting, scale_a and scale_b, a plain product's (None,
    alpha 1, casting "same_kind") or refused."""
    out, alpha, beta, c, bias, activation, row_scale, out_dtype, casting, scale_a, scale_b = epilogue
    is_plain = (type(alpha) in (int, float) and alpha == 1 and casting == "same_kind"
             and all(v is None for v in (out, beta, c, bias, activation, row_scale, out_dtype, scale_a, scale_b)))
    if not is_plain:
        raise ValueError("grouped_matmul: on tensors that require grad or under torch.compile only the plain "
                         "grouped product runs (no out, c, beta, bias, activation, row_scale, scales, out_dtype, "
                         "casting or alpha): the op's gradient has no epilogue terms; apply them after, or detach")
    if algorithm is not None and not isinstance(algorithm, str):
        raise TypeError(f"grouped_matmul: on tensors that require grad or under torch.compile the algorithm must "
                        f"be a registered name (got {type(algorithm).__name__})")
    return call("grouped_mm", a, b, offsets, counts, engine_handle(engine), algorithm, precision or "")
