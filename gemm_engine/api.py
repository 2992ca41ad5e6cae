"""The module-level API: `matmul` and `grouped_matmul` on the default engine (`default_engine`, created
on first use)."""
from __future__ import annotations

import threading

from .call.doc import grouped_doc
from .engine import Engine, matmul_doc
from .handles import DEFAULT as DEFAULT_FACTORY
from .tensors import torch_op_wanted

_default_engine: Engine | None = None
_default_lock = threading.Lock()


def default_engine() -> Engine:
    """The engine `matmul` uses: backend "auto" (or $GEMM_ENGINE_BACKEND), created on first use
    (once, whatever the threads: the first call builds it under a lock)."""
    global _default_engine
    if _default_engine is None:
        with _default_lock:
            if _default_engine is None:
                _default_engine = Engine()
    return _default_engine


DEFAULT_FACTORY.append(default_engine)


@matmul_doc("on the default engine (`default_engine`; see `Engine` for one bound to a backend and device)")
def matmul(a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None,
           out_dtype=None, casting="same_kind", algorithm=None, precision=None, tune=False, scale_a=None,
           scale_b=None, mul=None):
    if torch_op_wanted(a, b, (c, bias, mul, scale_a, scale_b)):
        # Before the default engine is made: torch.compile traces this call without entering it.
        from .torch.route import routed   # the optional torch layer (it needs torch)
        return routed(None, a, b, out=out, alpha=alpha, beta=beta, c=c, bias=bias, bias_axis=bias_axis,
                      activation=activation, out_dtype=out_dtype, casting=casting, algorithm=algorithm,
                      precision=precision, tune=tune, scale_a=scale_a, scale_b=scale_b, mul=mul)
    # Straight to the engine's call (`Engine.matmul` would ask `torch_op_wanted` again: a 64^3
    # call's host time is the budget here, bench/results/h100/torch_op.md).
    engine = _default_engine if _default_engine is not None else default_engine()
    return engine.run_call(a, b, out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting, algorithm,
                           precision, tune, scale_a, scale_b, mul)


@grouped_doc("on the default engine (`default_engine`)")
def grouped_matmul(a, b, *, offsets=None, counts=None, out=None, alpha=1.0, beta=None, c=None, bias=None,
                   bias_axis=-1, activation=None, row_scale=None, out_dtype=None, casting="same_kind", algorithm=None,
                   precision=None, scale_a=None, scale_b=None):
    return default_engine().grouped_matmul(a, b, offsets=offsets, counts=counts, out=out, alpha=alpha, beta=beta,
                                           c=c, bias=bias, bias_axis=bias_axis, activation=activation,
                                           row_scale=row_scale, out_dtype=out_dtype, casting=casting,
                                           algorithm=algorithm, precision=precision, scale_a=scale_a,
                                           scale_b=scale_b)


def quantized_matmul(x, qweight, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None,
                     out_dtype=None, casting="same_kind", algorithm=None):
    """``x @ qweight.dequantize()`` on the default engine, without materializing the weight (see
    `Engine.quantized_matmul`)."""
    return default_engine().quantized_matmul(x, qweight, out=out, alpha=alpha, beta=beta, c=c, bias=bias,
                                             bias_axis=bias_axis, activation=activation, out_dtype=out_dtype,
                                             casting=casting, algorithm=algorithm)
