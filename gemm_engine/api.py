"""The module-level API: `matmul` on the default engine (`default_engine`, created on first use),
and the one text that documents both it and `Engine.matmul`."""
from __future__ import annotations

import threading

from .engine import Engine

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


def matmul(a, b, *, out=None, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None,
           out_dtype=None, casting="same_kind", algorithm=None, precision=None, tune=False, scale_a=None,
           scale_b=None):
    """``act(alpha * (a @ b) + beta * c + bias)``, with ``a @ b`` following ``numpy.matmul``, on the
    default engine (`default_engine`; see `Engine` for one bound to a backend and device).

    a, b:        the operands: numpy arrays (or lists, scalars), device arrays of the engine's
                 backend (CuPy on CUDA, ``pyopencl.array.Array`` on OpenCL), torch tensors, or any
                 DLPack / CUDA-array-interface object. The result comes back in the caller's
                 library (torch in, torch out; numpy in, numpy out; device arrays stay there);
                 device arrays on the engine's device are read without a copy, on the stream of
                 their library (torch's current stream for torch tensors).
                 1-D operands are promoted as numpy promotes them, batch dimensions broadcast.
    out:         where to write the result (its shape, and a dtype the result casts to under
                 ``casting``); returned.
    alpha:       scales ``a @ b`` (a kernel argument: changing it does not recompile).
    beta, c:     add ``beta * c``, ``c`` broadcasting to the output (read in place through its
                 strides); ``beta`` defaults to 1 when ``c`` is given, ``beta=0`` does not read ``c``.
    bias:        a vector added over the output's columns (``bias_axis=-1``, length N) or rows
                 (``bias_axis=0``, length M).
    activation:  applied last: "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", or an
                 `Activation` instance of your own (see `register_activation`).
    out_dtype:   the result dtype (default: numpy's promotion of a, b, c and bias, with the
                 exceptions a GEMM library makes: int8 @ int8 is int32, accumulated exactly; fp8 @
                 fp8 (float8_e4m3fn, float8_e5m2, mixed) is float32; bfloat16 @ bfloat16 is
                 bfloat16 (numpy with ml_dtypes gives float32: ask with ``out_dtype=numpy.float32``)).
    casting:     numpy's rule for ``out_dtype`` and ``out``: "same_kind" (default), "safe",
                 "equiv", "no" or "unsafe".
    algorithm:   a registered name, an `Algorithm` subclass or instance (default: the tuning
                 cache's choice for the problem's class, else ``"auto"``'s rules; ``Engine.explain``
                 says which and why).
    precision:   "tf32" lets float32 run on tensor cores rounded to tf32; default exact float32.
                 "fast_accum" lets fp8 products sum in the tensor cores' own accumulators (faster,
                 fewer bits: cuBLASLt's fast accumulation); by default they are promoted to float32
                 every 128 of K.
    tune:        time the candidates for this problem's class first when the tuning cache has no
                 entry for it; the winner is kept for later calls, in any process.
    scale_a, scale_b: dequantizing scales: the product is ``(a * scale_a) @ (b * scale_b)`` from
                 the exact stored values (fp8, int8 or any dtype; int8 then gives float32). Each a
                 number or array per tensor, a vector per row of a (M,) / column of b (N,), or per
                 block of 128 along K: scale_a (M, ceil(K/128)), scale_b (ceil(K/128), ceil(N/128));
                 see gemm_engine.epilogue.scales.

    Errors: ValueError / TypeError naming the argument, before anything runs; `SetupError` when
    the named algorithm cannot run the problem, with the reason.
    """
    return default_engine().matmul(a, b, out=out, alpha=alpha, beta=beta, c=c, bias=bias,
                                   bias_axis=bias_axis, activation=activation, out_dtype=out_dtype,
                                   casting=casting, algorithm=algorithm, precision=precision, tune=tune,
                                   scale_a=scale_a, scale_b=scale_b)


_ON_DEFAULT = "on the\n    default engine (`default_engine`; see `Engine` for one bound to a backend and device)."
Engine.matmul.__doc__ = matmul.__doc__.replace(_ON_DEFAULT, "on this\n    engine's device, by one generated kernel.")
