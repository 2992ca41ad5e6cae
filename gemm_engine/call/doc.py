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
                 ``c=out, beta=1`` with no activation or ``mul`` is ``out += alpha * (a @ b) + bias``:
                 on Hopper a 16-bit ``out`` gets each tile added (a reducing TMA store) instead of
                 read, the sum rounded to out's dtype twice, as ``out += a @ b`` would be.
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


GROUPED_DOC = """One GEMM per group in one launch, {where}.

    Each group g computes ``act(alpha * (a_g @ b_g) + beta * c + bias_g) * row_scale``; the group
    extents are read on the device (no synchronization, no padding per group, safe to capture in a
    CUDA graph and replay with new extents).

    Layouts (the extents: ``offsets``, each group's end, int32 or int64, as torch._grouped_mm's
    ``offs``; or ``counts``; on the device or the host):

    * contiguous (tokens sorted by expert): ``a`` (M, K), ``b`` (groups, K, N) in either layout,
      ``offsets`` (groups,) with ``offsets[-1] == M`` -> (M, N); rows of group g are
      ``offsets[g-1] .. offsets[g]`` (an empty group has none). Rows past ``offsets[-1]`` are not
      written;
    * masked (decode): ``a`` (groups, M, K), ``b`` (groups, K, N), ``counts`` (groups,) ->
      (groups, M, N); rows at or past a group's count are zeros in a fresh result, left as they
      were in a given ``out``, and never read into another row's result;
    * k (a weight gradient, the reduction grouped): ``a`` (M, K), ``b`` (K, N), ``offsets`` over
      K -> (groups, M, N): group g is ``a[:, lo:hi] @ b[lo:hi]`` (an empty group: the epilogue of
      zeros);
    * list: ``a`` and ``b`` lists (or tuples) of 2-D arrays, each pair its own M, N, K -> a list of
      products (no offsets or counts; sizes are known on the host).

    Offsets are clamped into ``[previous offset, M or K]`` and counts into ``[0, M]`` on the device.
    Epilogue terms may be shared or per group (a leading axis of groups): ``bias`` (N,) or
    (groups, N) over columns, per row (``bias_axis=0``); ``row_scale`` one float per output row
    (a routing weight; contiguous (M,), masked (groups, M)), applied last; ``scale_a`` /
    ``scale_b`` as in matmul, plus one value per group (groups,) and per-group columns
    (groups, N); block scales: scale_a (M, ceil(K/128)) (masked: (groups, M, ceil(K/128))),
    scale_b (groups, ceil(K/128), ceil(N/128)) (DeepGEMM's 1 x 128 and 128 x 128 layout);
    ``c`` broadcasting to the output. See gemm_engine.epilogue.grouped_terms for every shape.
    alpha, beta, activation, out, out_dtype, casting, precision: as in matmul. A gated activation
    ("swiglu"...) pairs each group's columns as in matmul (gate and up interleaved in b's columns,
    N even): the output has N / 2 columns, the bias N (before the gate), ``row_scale`` multiplies
    the gated value (an MoE up projection with its routing weight in one launch); not with ``c``.
    algorithm:   "grouped" (default: the best grouped composition that runs here), or a grouped
                 algorithm (``grouped_specialized_wgmma``, ``grouped_pipelined_wgmma``,
                 ``grouped_pipelined_mma``, ``grouped_simple_unit``, or `grouped_variant` of your own).

    Errors: ValueError / TypeError naming the argument; `SetupError` when the named algorithm
    cannot run the call.
    """


def grouped_doc(where: str):
    """Decorator: the one text that documents `Engine.grouped_matmul` and `gemm_engine.grouped_matmul`."""
    def apply(fn):
        fn.__doc__ = GROUPED_DOC.format(where=where)
        return fn
    return apply
