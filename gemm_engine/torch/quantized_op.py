"""``torch.ops.gemm_engine.quantized_mm``: a quantized weight's product as a registered torch op, so
that torch.compile traces `QuantizedLinear` whole (``fullgraph=True``) instead of breaking the graph
around it (a `QuantizedWeight` is no tensor: the op takes the module's buffers instead).

``quantized_mm(x, qweight, scales, zeros, bias, format, k, n, engine, algorithm)``: ``x (M, k) @ W +
bias`` with W (k, n) held as the packed words ``qweight`` (int32 bits), ``scales`` and ``zeros``
(int16 bits) of `format_key`'s format, the result in x's dtype. ``quantized_mm_t(gy, qweight,
scales, zeros, format, k, n, engine)``: ``gy @ W^T``, the input's gradient (on CUDA the transposed
weight, `TransposedQuantizedWeight`, through the engine's dequantizing pass; elsewhere W expanded
from the buffers by torch, dequantize.py, as `QuantizedProduct`'s backward). The bias's gradient is
gy summed over the rows; the weight's codes take none.

The op finds the `QuantizedWeight` of its tensors (`tensor_weight`): the one a `QuantizedLinear`
built from these buffers, else one made from them (a host copy, once per buffer), whose device
arrays are the buffers themselves on their CUDA device (`buffer_views`).
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

from ..handles import engine_of
from ..quant import QuantizedWeight, WeightFormat
from ..tensors import torch_memory
from .dequantize import dequantized
from .ops import LIB, plain

SCHEMAS = {
    "quantized_mm": ("(Tensor x, Tensor qweight, Tensor scales, Tensor? zeros, Tensor? bias, str format, int k, "
                     "int n, int engine, str? algorithm) -> Tensor"),
    "quantized_mm_t": "(Tensor gy, Tensor qweight, Tensor scales, Tensor? zeros, str format, int k, int n, "
                      "int engine) -> Tensor",
}

#: id of a packed-words tensor -> (a weak reference to it, its buffers' addresses, the `QuantizedWeight`
#: they hold); by id: a WeakKeyDictionary compares tensors with ==, which torch makes elementwise.
_WEIGHTS: dict = {}


def format_key(fmt: WeightFormat) -> str:
    """A weight format as the ops' ``format`` string."""
    return f"{fmt.kind}:{fmt.group_size}:{int(fmt.zeros)}:{fmt.scale}:{fmt.layout}"


def format_of(key: str) -> WeightFormat:
    kind, group, zeros, scale, layout = key.split(":")
    return WeightFormat(kind, int(group), bool(int(zeros)), scale, layout)


def buffer_views(buffers, runtime):
    """CUDA tensors ``buffers`` (packed words, scales, zeros or None) as the engine's device arrays of
    their weight on ``runtime`` (views of their memory: the weight is not held twice on the GPU),
    or None where the runtime is not theirs, or a buffer is not a contiguous run starting on 16
    bytes (the kernels read 16-byte vectors): the engine then uploads its own copy."""
    packed = buffers[0]
    if runtime.backend != "cuda" or packed.device.type != "cuda" or \
            (packed.device.index or 0) != runtime.device_index:
        return None
    views = []
    for t, dtype in zip(buffers, (np.uint32, np.uint16, np.uint16)):
        memory = None if t is None else torch_memory(t)
        if t is not None and (memory is None or not t.is_contiguous() or memory[0] % 16):
            return None
        # Owned by the storage, not the tensor: a buffer replaced (``.data =``) leaves the view its
        # old memory, alive, and the module's tensors free to die (`remember_weight`).
        views.append(None if t is None else runtime.from_address(*memory[:3], np.dtype(dtype), t.untyped_storage()))
    # Written on torch's streams (a .to, a load_state_dict): complete before any kernel reads them.
    torch.cuda.synchronize(packed.device)
    return views


def _addresses(buffers) -> tuple:
    return tuple(None if t is None else (t.device, t.data_ptr(), tuple(t.shape)) for t in buffers)


def remember_weight(buffers, q: QuantizedWeight) -> None:
    """Let the ops find ``q`` (made from ``buffers``) when they are given these buffers, until the
    packed words' tensor dies: nothing ``q`` holds refers to the tensors themselves (its device
    source reaches them weakly, its views hold their storage), so this table keeps no module's
    buffers alive."""
    refs = tuple(None if t is None else weakref.ref(t) for t in buffers)

    def source(runtime):
        alive = tuple(None if r is None else r() for r in refs)
        return None if any(r is not None and t is None for r, t in zip(refs, alive)) else buffer_views(alive, runtime)
    q.device_source = source
    key = id(buffers[0])
    _WEIGHTS[key] = (weakref.ref(buffers[0], lambda _, key=key: _WEIGHTS.pop(key, None)), _addresses(buffers), q)


def forget_weight(qweight) -> None:
    """Forget the weight remembered for these buffers (they were written in place: a load_state_dict)."""
    _WEIGHTS.pop(id(qweight), None)


def tensor_weight(qweight, scales, zeros, fmt: WeightFormat, k: int, n: int) -> QuantizedWeight:
    """The `QuantizedWeight` the buffers hold (the remembered one while they are unchanged)."""
    buffers = (qweight, scales, zeros)
    found = _WEIGHTS.get(id(qweight))
    if found is not None and found[0]() is qweight and found[1] == _addresses(buffers) and found[2].format == fmt:
        return found[2]
    host = [None if t is None else t.detach().cpu().numpy() for t in buffers]
    packed, sc, z = (None if a is None else a.view(np.uint32 if a.dtype == np.int32 else np.uint16) for a in host)
    q = QuantizedWeight(fmt, k, n, packed, sc, z)
    remember_weight(buffers, q)
    return q


def quantized_impl(x, qweight, scales, zeros, bias, format, k, n, engine, algorithm):
    q = tensor_weight(qweight, scales, zeros, format_of(format), k, n)
    return engine_of(engine).run_call(plain(x), q, None, 1.0, None, None, plain(bias), -1, None, None, "same_kind",
                                      algorithm or None, None, False, None, None, None)


def quantized_fake(x, qweight, scales, zeros, bias, format, k, n, engine, algorithm):
    return x.new_empty((*x.shape[:-1], n))


def transposed_impl(gy, qweight, scales, zeros, format, k, n, engine):
    eng, fmt = engine_of(engine), format_of(format)
    if gy.device.type == "cuda" and eng.runtime.backend == "cuda":
        # The transposed weight (`TransposedQuantizedWeight`): the engine's dequantizing pass writes
        # W from the buffers' words and a dense kernel reads it as W^T, each call.
        w = tensor_weight(qweight, scales, zeros, fmt, k, n).T
    else:
        w = dequantized(qweight, scales, zeros, fmt, k, n).to(gy.dtype).mT    # (n, k), on the buffers' device
    return eng.run_call(plain(gy), w, None, 1.0, None, None, None, -1, None, None, "same_kind",
                        None, None, False, None, None, None)


def transposed_fake(gy, qweight, scales, zeros, format, k, n, engine):
    return gy.new_empty((*gy.shape[:-1], k))


def _setup(ctx, inputs, output):
    x, qweight, scales, zeros, bias, format, k, n, engine, _ = inputs
    ctx.save_for_backward(qweight, scales, zeros)
    ctx.args, ctx.has_bias = (format, k, n, engine), bias is not None


def _backward(ctx, gy):
    qweight, scales, zeros = ctx.saved_tensors
    need = ctx.needs_input_grad
    gx = torch.ops.gemm_engine.quantized_mm_t(gy, qweight, scales, zeros, *ctx.args) if need[0] else None
    gbias = gy.reshape(-1, gy.shape[-1]).sum(0) if ctx.has_bias and need[4] else None
    return gx, None, None, None, gbias, None, None, None, None, None


for _name, _schema in SCHEMAS.items():
    LIB.define(_name + _schema)
_impls = {"quantized_mm": (quantized_impl, quantized_fake), "quantized_mm_t": (transposed_impl, transposed_fake)}
for _name, (_impl, _fake) in _impls.items():
    LIB.impl(_name, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"gemm_engine::{_name}", _fake, lib=LIB)
torch.library.register_autograd("gemm_engine::quantized_mm", _backward, setup_context=_setup, lib=LIB)

__all__ = ["buffer_views", "forget_weight", "format_key", "format_of", "remember_weight", "tensor_weight"]
