"""Backward formulas of ``torch.ops.gemm_engine.matmul`` and ``matmul_fused``, computed by the engine.

The ops the library calls have no autograd kernel (a Python one ran on every call of a compiled
graph, gradients or not: about 6 us a call on CPU, bench/results/cpu/torch_compile_host.md); the
gradient is an autograd.Function around each (`Matmul`, `Fused`), which `call` applies where an
input requires grad (and the public ops' autograd kernels apply, for direct calls): eagerly, torch's autograd records it; under torch.compile Dynamo traces it, and
AOTAutograd puts the op in the forward graph and the backward formulas' ops in the backward graph.

For ``y = f(z) * mul``, ``z = alpha * (a @ b) + beta * c + bias`` (gemm_engine/torch/ops.py):

* the gradient through the activation, ``gz = f'(z) * gy * mul``, is one more GEMM of the engine:
  z recomputed from the saved a and b with the same epilogue and ``Derivative(f)`` applied to it,
  multiplied by the upstream gradient (the epilogue's ``mul`` term); for a gated activation
  (SwiGLU) it writes both columns of each pair, so ``gz`` has b's columns;
* ``ga = alpha * gz @ b^T`` and ``gb = alpha * a^T @ gz``: the engine's products of transposed views
  (no copies); where b broadcasts over a's batch (a linear layer's weight) ``gb`` is one GEMM over
  the flattened batch, and it is computed in b's own layout (a column-major b, the ``weight.mT`` of
  a linear layer, gets a column-major gradient: the weight's gradient is then row-major);
* ``gc = beta * gz`` and ``gbias`` (gz summed over the other axes), broadcast dimensions summed;
* ``gmul = gy * f(z)`` (f(z) recomputed) where ``mul`` requires grad.

The formulas only call registered ops (and torch's sums), so torch.compile traces them too; under
``create_graph`` they call them through `call` again, so a plain product has a second derivative
(a fused activation's derivative has none: it says so). A scaled (fp8 / int8) product has no
gradient (route.py refuses it).
"""
from __future__ import annotations

import torch

from .ops import AUTOCAST_DEVICES, LIB, autocast_cast, op


def call(name: str, *args):
    """``torch.ops.gemm_engine.<name>`` on ``args`` (the schema's, positional), through its
    autograd.Function where grad mode is on and a tensor among them requires grad."""
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in args):
        device = args[0].device.type
        # Cast before the Function saves its inputs, as torch's mm (ops.py casts on these devices).
        if device in AUTOCAST_DEVICES and torch.is_autocast_enabled(device):
            args = tuple(autocast_cast(x, device) for x in args)
        return FUNCTIONS[name].apply(*args)
    return op(name)(*args)


def _mm(x, y, alpha, engine, precision):
    """The engine's ``alpha * x @ y`` (numpy's broadcasting)."""
    if alpha == 1:
        return call("matmul", x, y, engine, None, precision)
    return call("matmul_fused", x, y, None, None, None, alpha, 0.0, -1, "", None, "same_kind", engine, None, precision)


def _as_matrices(a, b, gz):
    """a, b and gz with the axes a 1-D operand lost put back: (..., M, K), (..., K, N), (..., M, N)."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    if b.dim() == 1:
        gz = gz.unsqueeze(-1)
    if a.dim() == 1:
        gz = gz.unsqueeze(-2)
    return a2, b2, gz


def operand_grads(a, b, gz, alpha, need_a: bool, need_b: bool, engine: int, precision: str):
    """(ga, gb): the gradients of ``alpha * a @ b`` given gz, in a's and b's shapes and dtypes."""
    a2, b2, g2 = _as_matrices(a, b, gz)
    ga = gb = None
    if need_a:
        ga = _mm(g2, b2.mT, alpha, engine, precision)
        ga = ga.sum_to_size(a2.shape).reshape(a.shape).to(a.dtype)
    if need_b:
        if b2.dim() == 2:
            # b broadcasts over any batch: one GEMM with the batch flattened into its K.
            k, n = b2.shape
            flat_a = a2.expand(*g2.shape[:-2], *a2.shape[-2:]).reshape(-1, k)
            flat_g = g2.reshape(-1, n)
            if column_major(b2):     # column-major b: its gradient too
                gb = _mm(flat_g.mT, flat_a, alpha, engine, precision).mT
            else:
                gb = _mm(flat_a.mT, flat_g, alpha, engine, precision)
        else:
            gb = _mm(a2.mT, g2, alpha, engine, precision).sum_to_size(b2.shape)
        gb = gb.reshape(b.shape).to(b.dtype)
    return ga, gb


def column_major(t) -> bool:
    """Whether ``t``'s last two axes are column-major (a linear layer's ``weight.mT``): a weight's
    gradient is computed in its layout."""
    return t.stride(-2) == 1 and t.stride(-1) != 1


def _bias_grad(bias, g2, bias_axis: int):
    """gz summed over every axis but the bias's (columns: the last; rows: the one before)."""
    axis = -1 if bias_axis in (-1, 1) else -2
    dims = [d for d in range(g2.dim()) if d != g2.dim() + axis]
    return g2.sum(dim=dims).to(bias.dtype)


def setup_fused(ctx, inputs, output):
    a, b, c, bias, mul, alpha, beta, bias_axis, activation, out_dtype, casting, engine, algorithm, precision = inputs
    ctx.save_for_backward(a, b, c, bias, mul)
    ctx.options = (alpha, beta, bias_axis, activation, engine, precision)


def backward_fused(ctx, gy):
    a, b, c, bias, mul = ctx.saved_tensors
    alpha, beta, bias_axis, activation, engine, precision = ctx.options
    need = ctx.needs_input_grad
    # Keys only (ops.py `activation_key`): Dynamo traces this backward, and an activation's key is
    # a constant string where the Activation's own methods (its __eq__) are not traceable everywhere.
    if activation.startswith("derivative:"):
        raise RuntimeError("gemm_engine: a Derivative activation has no derivative of its own (no double backward "
                           "through the engine's fused epilogue)")
    g = gy if mul is None else gy * mul
    gmul = None
    if mul is not None and need[4]:
        value = call("matmul_fused", a, b, c, bias, None, alpha, beta, bias_axis, activation, None, "same_kind",
                     engine, None, precision)
        gmul = (gy * value).sum_to_size(mul.shape).to(mul.dtype)
    if not activation:
        gz = g
    else:
        gz = call("matmul_fused", a, b, c, bias, g, alpha, beta, bias_axis, "derivative:" + activation, None,
                  "same_kind", engine, None, precision)
    ga, gb = operand_grads(a, b, gz, alpha, need[0], need[1], engine, precision)
    gc = gbias = None
    if c is not None and need[2]:
        gc = (beta * gz).sum_to_size(c.shape).to(c.dtype)
    if bias is not None and need[3]:
        gbias = _bias_grad(bias, _as_matrices(a, b, gz)[2], bias_axis)
    return ga, gb, gc, gbias, gmul, None, None, None, None, None, None, None, None, None


def setup_matmul(ctx, inputs, output):
    a, b, engine, algorithm, precision = inputs
    ctx.save_for_backward(a, b)
    ctx.options = (engine, precision)


def backward_matmul(ctx, gy):
    a, b = ctx.saved_tensors
    engine, precision = ctx.options
    ga, gb = operand_grads(a, b, gy, 1.0, ctx.needs_input_grad[0], ctx.needs_input_grad[1], engine, precision)
    return ga, gb, None, None, None


# forward(ctx, ...) rather than a separate setup_context: Function.apply binds a setup_context
# Function's arguments through inspect.signature on every call (9 us on CPU).
class Matmul(torch.autograd.Function):
    """``torch.ops.gemm_engine.matmul`` with its gradient (`backward_matmul`)."""

    @staticmethod
    def forward(ctx, *inputs):
        setup_matmul(ctx, inputs, None)
        return op("matmul")(*inputs)

    backward = staticmethod(backward_matmul)


class Fused(torch.autograd.Function):
    """``torch.ops.gemm_engine.matmul_fused`` with its gradient (`backward_fused`)."""

    @staticmethod
    def forward(ctx, *inputs):
        setup_fused(ctx, inputs, None)
        return op("matmul_fused")(*inputs)

    backward = staticmethod(backward_fused)


FUNCTIONS = {"matmul": Matmul, "matmul_fused": Fused}


def differentiable(function):
    def kernel(*args):
        return function.apply(*args)
    return kernel


def _scaled_autograd(*args):
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in args):
        raise RuntimeError("torch.ops.gemm_engine.scaled_matmul: a scaled (fp8 / int8) product has no gradient; "
                           "detach its operands, or multiply in a float dtype")
    return op("scaled_matmul")(*args)


# The public ops called directly (``torch.ops.gemm_engine.matmul``) differentiate as the library's
# calls do, through the same Functions; the library itself calls the twins without autograd (ops.py).
for _name, _function in FUNCTIONS.items():
    LIB.impl(_name, differentiable(_function), "Autograd")
LIB.impl("scaled_matmul", _scaled_autograd, "Autograd")
