"""The one text that documents `gemm_engine.matmul` and `Engine.matmul` (`matmul_doc`)."""
from __future__ import annotations

MATMUL_DOC = """``act(alpha * (a @ b) + beta * c + bias) * mul``, with ``a @ b`` following ``numpy.matmul``, {where}.

    a, b:        the operands: numpy arrays (or lists, scalars), device arrays of the engine's
                 backend (CuPy on CUDA, ``pyopencl.array.Array`` on OpenCL), torch tensors, or any
                 DLPack / CUDA-array-interface object. The result comes back in the caller's
                 library (torch in, torch out; numpy in, numpy out; device arrays stay there);
                 device arrays on the engine's device are read without a copy, on the stream of
                 their library (torch's current stream for torch tensors).
                 1-D operands are promoted as numpy promotes them, batch dimensions broadcast.
    out:         where to write the result (an array of its shape, and a dtype the result casts to
                 under ``casting``); returned. It may be an input: the result is as if the inputs
                 were copied first (numpy's rule).
    alpha:       scales ``a @ b`` (a kernel argument: changing it does not recompile).
    beta, c:     add ``beta * c``, ``c`` broadcasting to the output (read in place through its
                 strides); ``beta`` defaults to 1 when ``c`` is given, ``beta=0`` does not read ``c``.
    bias:        a vector added over the output's columns (``bias_axis=-1``, length N) or rows
                 (``bias_axis=0``, length M).
    activation:  applied last: "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh", or an
                 `Activation` instance of your own (see `register_activation`). Gated ones,
                 "swiglu", "geglu", "reglu", pair b's columns (gate and up interleaved: column 2j
                 the gate's j-th, 2j + 1 the up projection's) into ``gate(g) * u``: the result has
                 half of b's columns (one GEMM, the gate's half never written). A `Derivative`
                 computes the activation's derivative (a gated one's for both columns of a pair).
    mul:         multiplies the activation's result, broadcasting to it (e.g. the upstream
                 gradient, with ``activation=Derivative(f)``: the gradient through ``f``).
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
                 finite number or array per tensor, a vector per row of a (M,) / column of b (N,),
                 or per block of 128 along K: scale_a (M, ceil(K/128)), scale_b (ceil(K/128),
                 ceil(N/128)); see gemm_engine.epilogue.scales.

    torch tensors that require grad (or under torch.compile, or torch.autocast) go through the
    registered ops ``torch.ops.gemm_engine.*`` (gemm_engine/torch/): the result has a ``grad_fn``
    whose backward the engine computes.

    Errors: ValueError / TypeError naming the argument, before anything runs; `SetupError` when
    the named algorithm cannot run the problem, with the reason.
    """


def matmul_doc(where: str):
    """Decorator: the one text that documents `Engine.matmul` and `gemm_engine.matmul`."""
    def apply(fn):
        fn.__doc__ = MATMUL_DOC.format(where=where)
        return fn
    return apply
