"""``torch.ops.gemm_engine.grouped_mm``: the engine's grouped GEMM (`Engine.grouped_matmul`) as a
registered torch operator with its gradient, for training mixture-of-experts layers: the layouts
whose extents live on the device, each gradient again a grouped product of the engine (no host
synchronization: a step with new routing replays in a captured CUDA graph).

``grouped_mm(a, b, offsets, counts, bias, row_scale, activation, engine, algorithm, precision)``:
``y = f(a_g @ b_g + bias) * row_scale``, a column bias shared or per group ((N,) or (G, N)), an
activation (elementwise, or gated: SwiGLU, N / 2 output columns; gates.py) and a scale per
row (contiguous (M,), masked (G, C): a routing weight), each optional (bias and row scale:
contiguous and masked layouts). With ``gz = gy * row_scale`` (through f: gates.py, from
the pre-activation the forward keeps), the operands' gradients are those
below of gz; ``gbias`` is gz summed over the rows each bias reached (per group: an index_add over
each row's group, found on the device); ``grow_scale`` the unscaled result (one more grouped
product) times gy, summed per row.

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
past it are not written, forward or backward; their gradients are zero). Other epilogue terms
(c, scales, alpha) have no gradient here: `Engine.grouped_matmul` refuses them on
tensors that require grad.
The fake implementation gives the layout's shape and the engine's result dtype, so torch.compile
traces a call.
"""
from __future__ import annotations

import torch

from ..call import numpy_rules
from ..handles import engine_of
from ..tensors import numpy_torch_dtype, torch_numpy_dtype
from .autograd import FUNCTIONS, call, column_major, differentiable
from .gates import activated, activation_grad, differentiable_activation
from .ops import LIB, activation_key, activation_of, autocast_cast, engine_handle, kernel_name, op, plain

SCHEMA = ("(Tensor a, Tensor b, Tensor? offsets, Tensor? counts, Tensor? bias, Tensor? row_scale, str activation, "
          "int engine, str? algorithm, str precision) -> Tensor")


def grouped_impl(a, b, offsets, counts, bias, row_scale, activation, engine, algorithm, precision):
    # run_grouped: the engine's call without the torch routing (this is what the routing reaches).
    return engine_of(engine).run_grouped(plain(a), plain(b), offsets, counts, algorithm or None, precision or None,
                                         None, 1.0, None, None, plain(bias), -1, activation_of(activation),
                                         plain(row_scale), None, "same_kind", None, None)


def _layout(a, b, offsets, counts) -> str:
    if counts is not None:
        return "masked"
    return "contiguous" if b.dim() == 3 else "k"


def grouped_fake(a, b, offsets, counts, bias, row_scale, activation, engine, algorithm, precision):
    types = numpy_rules.result_types(torch_numpy_dtype(a.dtype), torch_numpy_dtype(b.dtype),
                                     bias=None if bias is None else torch_numpy_dtype(bias.dtype))
    layout = _layout(a, b, offsets, counts)
    n = b.shape[-1] // 2 if numpy_rules.pairs_of(activation_of(activation)) == 1 else b.shape[-1]
    if layout == "contiguous":
        shape = (a.shape[0], n)
    elif layout == "masked":
        shape = (a.shape[0], a.shape[1], n)
    else:
        shape = (offsets.shape[0], a.shape[0], n)
    return a.new_empty(shape, dtype=numpy_torch_dtype(types.result))


def _mm(a, b, offsets, counts, options, bias=None, row_scale=None):
    return call("grouped_mm", a, b, offsets, counts, bias, row_scale, "", *options)


def _contiguous_grads(a, b, offsets, gy, need, options):
    ga = None
    if need[0]:     # rows past the last offset: not written by the product, zero as gradients
        ga = _live_rows(_mm(gy, b.mT, offsets, None, options), offsets, None, "contiguous")[0].to(a.dtype)
    gb = None
    if need[1]:
        # gb_g = a_g^T gy_g: a's rows of each group reduced (the k layout), in b's layout.
        gb = (_mm(gy.mT, a, offsets, None, options).mT if column_major(b)
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


def _live_rows(gz, offsets, counts, layout: str):
    """gz with the rows no group holds zeroed (masked: at or past a count; contiguous: past the last
    offset), and each row's group (contiguous; masked rows are their slab's)."""
    if layout == "masked":
        rows = torch.arange(gz.shape[1], device=gz.device)
        return torch.where((rows[None, :] < counts[:, None].to(rows.dtype))[..., None], gz, 0), None
    rows = torch.arange(gz.shape[0], device=gz.device)
    group = torch.searchsorted(offsets.to(rows.dtype), rows, right=True)     # G for rows past the end
    return torch.where((group < offsets.shape[0])[:, None], gz, 0), group


def _bias_grad(bias, gz, offsets, counts, layout: str):
    """``bias``'s gradient: gz summed over the rows it was added to (a group's, or every group's)."""
    live, group = _live_rows(gz, offsets, counts, layout)
    if bias.dim() == 1:
        return live.reshape(-1, live.shape[-1]).sum(0).to(bias.dtype)
    if layout == "masked":
        return live.sum(1).to(bias.dtype)
    sums = live.new_zeros((bias.shape[0] + 1, live.shape[-1]))
    return sums.index_add_(0, group, live)[:-1].to(bias.dtype)


class GroupedMm(torch.autograd.Function):
    """``torch.ops.gemm_engine.grouped_mm`` with its gradient (the module docstring's formulas)."""

    @staticmethod
    def forward(ctx, a, b, offsets, counts, bias, row_scale, activation, engine, algorithm, precision):
        ctx.options, ctx.activation = (engine, algorithm, precision), activation
        if not activation:
            ctx.save_for_backward(a, b, offsets, counts, bias, row_scale, None)
            return op("grouped_mm")(a, b, offsets, counts, bias, row_scale, activation, engine, algorithm, precision)
        # Training through an activation: the pre-activation kept for the backward, as torch's layers
        # keep it (the fused epilogue's backward would recompute the product: one more grouped GEMM,
        # 3 ms of a Mixtral layer's 20, bench/results/h200/moe_layer.md); f applied by torch.
        z = op("grouped_mm")(a, b, offsets, counts, bias, None, "", engine, algorithm, precision)
        layout = _layout(a, b, offsets, counts)
        z = z if layout == "k" else _live_rows(z, offsets, counts, layout)[0]
        ctx.save_for_backward(a, b, offsets, counts, bias, row_scale, z)
        return activated(z, row_scale, activation)

    @staticmethod
    def backward(ctx, gy):
        a, b, offsets, counts, bias, row_scale, z = ctx.saved_tensors
        need = ctx.needs_input_grad
        ga, gb, gbias, gscale = grouped_grads(a, b, offsets, counts, bias, row_scale, gy, need[:2] + need[4:6],
                                              ctx.options, ctx.activation, z)
        return ga, gb, None, None, gbias, gscale, None, None, None, None


def grouped_grads(a, b, offsets, counts, bias, row_scale, gy, need, options, activation="", z=None):
    """(ga, gb, gbias, grow_scale) of ``grouped_mm(a, b, offsets, counts, bias, row_scale,
    activation)`` for ``gy`` (the module docstring's formulas), each where ``need`` (four flags, in
    that order) says; ``options``: the op's (engine, algorithm, precision) for the grouped products
    they take; ``z``: the pre-activation, if kept (else recomputed)."""
    layout = _layout(a, b, offsets, counts)
    extents = counts if layout == "masked" else offsets
    gy = gy.contiguous()
    gz, gscale = gy, None
    if activation:      # through f, from the pre-activation (rows no group holds: zeros)
        if z is None:
            z = _mm(a, b, offsets, counts, options, bias)
            z = z if layout == "k" else _live_rows(z, offsets, counts, layout)[0]
        gz, gscale = activation_grad(z, gy, row_scale, activation, row_scale is not None and need[3])
    elif row_scale is not None:
        scale = row_scale[..., None].to(gy.dtype)
        gz = gy * scale
        if need[3]:     # the routing weight's, with a's gradient from the same product (_scale_grad)
            unscaled, gscale = _scale_grad(a, b, offsets, counts, bias, gy, layout, options)
            ga = (unscaled * scale).to(a.dtype) if need[0] else None
            gb = GRADS[layout](a, b, extents, gz, (False, need[1]), options)[1]
            gbias = _bias_grad(bias, gz, offsets, counts, layout) if bias is not None and need[2] else None
            return ga, gb, gbias, gscale.to(row_scale.dtype)
    ga, gb = GRADS[layout](a, b, extents, gz, need[:2], options)
    gbias = _bias_grad(bias, gz, offsets, counts, layout) if bias is not None and need[2] else None
    return ga, gb, gbias, gscale


def _scale_grad(a, b, offsets, counts, bias, gy, layout: str, options):
    """(``g = grouped(gy, b^T)``, the row scale's gradient) of ``(a @ b + bias) * row_scale``: the
    gradient of row r is ``sum_n (a @ b + bias)[r, n] gy[r, n] = a[r] . g[r] + bias_r . gy[r]``,
    so it costs no product past ``g``, which is a's gradient before the scale: one grouped product
    fewer than recomputing the unscaled result (a mixture-of-experts down projection's backward:
    three instead of four). Rows no group holds: zero (their a may hold anything)."""
    g, group = _mm(gy, b.mT, offsets if layout == "contiguous" else None, counts, options), None
    if layout == "contiguous":      # rows past the last offset: not written, zero as gradients
        g, group = _live_rows(g, offsets, counts, layout)
    grad = (a * g).sum(-1)
    if bias is not None:            # each row's group's bias (past the last offset: a row of zeros)
        rows = (bias if bias.dim() == 1 else bias[:, None, :] if layout == "masked"
                else torch.cat([bias, bias.new_zeros(1, bias.shape[-1])])[group])
        grad = grad + (rows.to(gy.dtype) * gy).sum(-1)
    return g, _live_rows(grad[..., None], offsets, counts, layout)[0][..., 0]


for _defined in ("grouped_mm", kernel_name("grouped_mm")):
    LIB.define(_defined + SCHEMA)
    LIB.impl(_defined, grouped_impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"gemm_engine::{_defined}", grouped_fake, lib=LIB)
FUNCTIONS["grouped_mm"] = GroupedMm
LIB.impl("grouped_mm", differentiable(GroupedMm), "Autograd")


def routed_grouped(engine, a, b, offsets, counts, algorithm, precision, *epilogue):
    """`Engine.grouped_matmul` on torch tensors that need torch's machinery: under autocast a, b, c
    and bias are cast to autocast's dtype first (as torch's matmul casts them; the row scales keep
    theirs); then a call that needs no gradient outside torch.compile runs on the engine as it is,
    and one that does goes through ``grouped_mm`` (``epilogue``: the call's out, alpha, beta, c,
    bias, bias_axis, activation, row_scale, out_dtype, casting, scale_a and scale_b: there a column
    bias and a row scale in the contiguous and masked layouts, an activation (with a gradient where
    one is needed: gates.py), the rest a plain product's, else refused)."""
    out, alpha, beta, c, bias, bias_axis, activation, row_scale, out_dtype, casting, scale_a, scale_b = epilogue
    device = a.device.type
    if torch.is_autocast_enabled(device):
        a, b, c, bias = (autocast_cast(t, device) for t in (a, b, c, bias))
    grad = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in (a, b, c, bias, row_scale))
    if not grad and not torch.compiler.is_compiling():
        return engine.run_grouped(a, b, offsets, counts, algorithm, precision, out, alpha, beta, c, bias, bias_axis,
                                  activation, row_scale, out_dtype, casting, scale_a, scale_b)
    terms = bias is not None or row_scale is not None
    if not (type(alpha) in (int, float) and alpha == 1 and casting == "same_kind" and bias_axis in (-1, 1)
            and all(v is None for v in (out, beta, c, out_dtype, scale_a, scale_b))
            and not (terms and counts is None and getattr(b, "dim", lambda: 0)() == 2)):
        raise ValueError("grouped_matmul: on tensors that require grad or under torch.compile a grouped product "
                         "takes a column bias and row_scale (contiguous and masked layouts), an activation and no "
                         "other epilogue term (out, c, beta, bias_axis, scales, out_dtype, casting, alpha): their "
                         "gradients are not built; apply them after, or detach")
    key = activation_key(activation)
    if grad and not differentiable_activation(key):
        raise ValueError(f"grouped_matmul: the activation {activation!r} has no gradient in a grouped product (the "
                         f"built-in elementwise and gated ones have); apply it after the product, or detach")
    if algorithm is not None and not isinstance(algorithm, str):
        raise TypeError(f"grouped_matmul: on tensors that require grad or under torch.compile the algorithm must "
                        f"be a registered name (got {type(algorithm).__name__})")
    bias, row_scale = (x if x is None or isinstance(x, torch.Tensor) else torch.as_tensor(x, device=a.device)
                       for x in (bias, row_scale))
    with torch.autocast(device, enabled=False):      # cast above: the routing weights keep their dtype
        return call("grouped_mm", a, b, offsets, counts, bias, row_scale, key, engine_handle(engine), algorithm,
                    precision or "")


def routed_list(engine, a, b, offsets, counts, precision, *epilogue):
    """The list layout on torch tensors that need torch's machinery (one requiring grad, torch.compile,
    autocast): one `Engine.matmul` per pair, each differentiable and traced as the dense ops are (one
    launch a pair, not the list layout's one). Its arguments are the list layout's: no offsets,
    counts, c, beta, bias, row_scale or scales (refused as the list layout refuses them)."""
    out, alpha, beta, c, bias, bias_axis, activation, row_scale, out_dtype, casting, scale_a, scale_b = epilogue
    given = [name for name, value in (("offsets", offsets), ("counts", counts), ("c", c), ("beta", beta),
                                      ("bias", bias), ("row_scale", row_scale), ("scale_a", scale_a),
                                      ("scale_b", scale_b), ("out", out)) if value is not None]
    if given:
        raise ValueError(f"grouped_matmul: the list layout takes alpha and activation as its epilogue (and, on "
                         f"tensors that require grad, no out), not {', '.join(given)}")
    if len(a) != len(b) or any(getattr(x, "ndim", 0) != 2 or getattr(w, "ndim", 0) != 2 for x, w in zip(a, b)):
        raise TypeError("grouped_matmul: the list layout takes a and b both as lists of 2-D arrays, of one length")
    return [engine.matmul(x, w, alpha=alpha, bias_axis=bias_axis, activation=activation, out_dtype=out_dtype,
                          casting=casting, precision=precision) for x, w in zip(a, b)]
