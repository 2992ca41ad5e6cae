"""grouped_matmul against float64 references per group, on every backend (PoCL in CI): every layout,
routings that stress the walk (empty groups, one token, every token in one group, counts that are
no multiple of the tile, counts past the slab), every dtype, the fused per-group epilogues, a
given out (masked rows past a count untouched), and the errors that name the argument."""
from __future__ import annotations

import numpy as np
import pytest

from grouped_support import contiguous_ref, count_general_calls, device_arrays, k_ref, masked_ref, routing
from helpers import BF16, rel_error
from gemm_engine.errors import SetupError

TOL = {"float32": 2e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.5e-2}
E, T, K, N = 5, 70, 40, 36


def offsets(counts, dtype=np.int32):
    return np.cumsum(counts).astype(dtype)


def close(result, ref, dtype="float32"):
    assert np.isfinite(np.asarray(result, np.float64)).all(), "unwritten (poisoned) elements"
    err = rel_error(result, ref)
    assert err <= TOL[dtype], f"relative error {err:.3e} > {TOL[dtype]:.1e}"


def data(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(BF16 if dtype == "bfloat16" else dtype)


# -- contiguous ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random", "one", "balanced", "skewed"])
def test_contiguous_routings(engine, rng, kind):
    counts = routing(rng, E, T, kind)
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    out = engine.grouped_matmul(x, w, offsets=offsets(counts))
    close(out, contiguous_ref(x, w, counts))


@pytest.mark.parametrize("tokens", [0, 1, 2, 17])
def test_contiguous_few_tokens(engine, rng, tokens):
    counts = routing(rng, E, tokens)
    x, w = data(rng, (tokens, K)), data(rng, (E, K, N))
    out = engine.grouped_matmul(x, w, offsets=offsets(counts))
    assert out.shape == (tokens, N)
    if tokens:
        close(out, contiguous_ref(x, w, counts))


def test_an_empty_reduction_gives_each_groups_epilogue_of_zeros(engine, rng):
    counts = routing(rng, E, T)
    x, w, bias = data(rng, (T, 0)), data(rng, (E, 0, N)), data(rng, (E, N))
    out = engine.grouped_matmul(x, w, offsets=offsets(counts), bias=bias, activation="relu")
    close(out, contiguous_ref(x, w, counts, bias=bias, activation="relu"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"] + (["bfloat16"] if BF16 is not None else []))
def test_contiguous_dtypes_and_weight_layouts(engine, rng, dtype):
    counts = routing(rng, E, T)
    x, w = data(rng, (T, K), dtype), data(rng, (E, K, N), dtype)
    rt = engine.runtime
    # the weights as nn.Linear keeps them: (groups, N, K) contiguous, read as (groups, K, N)
    dw = w if dtype == "bfloat16" else rt.to_device(np.ascontiguousarray(w.transpose((0, 2, 1)))).transpose((0, 2, 1))
    out = engine.grouped_matmul(x if dtype == "bfloat16" else rt.to_device(x), dw, offsets=offsets(counts, np.int64))
    close(out if dtype == "bfloat16" else rt.to_host(out), contiguous_ref(x, w, counts), dtype)


def test_contiguous_int8_is_exact(engine, rng):
    counts = routing(rng, E, T)
    x = rng.integers(-128, 128, (T, K)).astype(np.int8)
    w = rng.integers(-128, 128, (E, K, N)).astype(np.int8)
    out = engine.grouped_matmul(x, w, offsets=offsets(counts))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, contiguous_ref(x, w, counts).astype(np.int64))


def test_rows_past_the_last_offset_are_left_alone(engine, rng):
    counts = routing(rng, E, T - 9)
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    out = np.full((T, N), 7.0, np.float32)
    engine.grouped_matmul(x, w, offsets=offsets(counts), out=out)
    ref = contiguous_ref(x[:T - 9], w, counts)
    close(out[:T - 9], ref)
    assert (out[T - 9:] == 7.0).all()


def test_offsets_out_of_order_are_clamped_not_out_of_bounds(engine, rng):
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    bad = np.array([-5, 20, 20, 90, 95], np.int32)        # negative, past T
    out = np.full((T, N), 7.0, np.float32)
    engine.grouped_matmul(x, w, offsets=bad, out=out)
    # clamped into [0, T]: group 1 rows 0..20, group 3 rows 20..70, the others empty
    close(out, contiguous_ref(x, w, [0, 20, 0, 50, 0]))


# -- fused epilogues ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["bias_per_group", "shared_bias_relu", "row_bias", "routing_weight", "c_alpha",
                                  "group_scale", "column_scales"])
def test_contiguous_epilogues(engine, rng, case):
    counts = routing(rng, E, T)
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    kw, terms = {}, {}
    if case == "bias_per_group":
        kw = terms = dict(bias=data(rng, (E, N)), activation="silu")
    elif case == "shared_bias_relu":
        kw = terms = dict(bias=data(rng, (N,)), activation="relu")
    elif case == "row_bias":
        kw = terms = dict(bias=data(rng, (T,)), bias_axis=0)
    elif case == "routing_weight":
        kw = terms = dict(row_scale=rng.random(T).astype(np.float32), bias=data(rng, (E, N)))
    elif case == "c_alpha":
        kw = terms = dict(c=data(rng, (T, N)), alpha=0.5, beta=2.0)
    elif case == "group_scale":           # one weight scale per expert, one activation scale
        s = (rng.random(E) + 0.5).astype(np.float32)
        out = engine.grouped_matmul(x, w, offsets=offsets(counts), scale_b=s, scale_a=0.25)
        close(out, contiguous_ref(x, w * s[:, None, None], counts, alpha=0.25))
        return
    elif case == "column_scales":         # per-expert per-column weight scales, per-token scales
        sb, sa = (rng.random((E, N)) + 0.5).astype(np.float32), (rng.random(T) + 0.5).astype(np.float32)
        kw = dict(scale_b=sb, scale_a=sa)
        ref = contiguous_ref(x * sa[:, None], w * sb[:, None, :], counts)
        close(engine.grouped_matmul(x, w, offsets=offsets(counts), **kw), ref)
        return
    out = engine.grouped_matmul(x, w, offsets=offsets(counts), **kw)
    close(out, contiguous_ref(x, w, counts, **terms))


def test_block_scales_fall_back_to_dequantized_operands_where_no_kernel_applies_them(engine, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    k = 300
    counts = routing(rng, 3, 40)
    x = (rng.standard_normal((40, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    w = (rng.standard_normal((3, k, N)) * 3).astype(ml_dtypes.float8_e4m3fn)
    kb, nb = -(-k // 128), -(-N // 128)
    sa, sb = (rng.random((40, kb)) + 0.5).astype(np.float32), (rng.random((3, kb, nb)) + 0.5).astype(np.float32)
    out = engine.grouped_matmul(x, w, offsets=offsets(counts), scale_a=sa, scale_b=sb)
    fa = np.repeat(sa, 128, 1)[:, :k]
    fb = np.repeat(np.repeat(sb, 128, 1), 128, 2)[:, :k, :N]
    close(out, contiguous_ref(x.astype(np.float64) * fa, w.astype(np.float64) * fb, counts))


# -- masked -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("counts", [[3, 0, 12, 12, 1], [0, 0, 0, 0, 0], [40, 12, -3, 5, 12]], ids=["ragged", "empty", "clamped"])
def test_masked_rows_past_a_count_are_zero_and_never_read(engine, rng, counts):
    cap = 12
    x, w = data(rng, (E, cap, K)), data(rng, (E, K, N))
    counts = np.array(counts, np.int32)
    for g, n in enumerate(counts):       # padding rows hold NaN: a kernel reading them into a result fails
        x[g, max(n, 0):] = np.nan
    bias, rs = data(rng, (E, N)), rng.random((E, cap)).astype(np.float32)
    out = engine.grouped_matmul(x, w, counts=counts, bias=bias, row_scale=rs)
    assert out.shape == (E, cap, N)
    close(out, masked_ref(np.nan_to_num(x), w, counts, bias=bias, row_scale=rs))
    for g, n in enumerate(np.clip(counts, 0, cap)):
        assert (out[g, n:] == 0).all()


def test_masked_values_and_a_given_out_keeps_its_other_rows(engine, rng):
    cap = 12
    x, w = data(rng, (E, cap, K)), data(rng, (E, K, N))
    counts = np.array([3, 0, 12, 7, 1], np.int32)
    bias, rs = data(rng, (E, N)), rng.random((E, cap)).astype(np.float32)
    out = data(rng, (E, cap, N))
    before = out.copy()
    result = engine.grouped_matmul(x, w, counts=counts, bias=bias, row_scale=rs, activation="relu", out=out)
    assert result is out
    close(out, masked_ref(x, w, counts, out=before, bias=bias, row_scale=rs, activation="relu"))
    # through a device out that is not contiguous (a temporary that starts as its copy)
    rt = engine.runtime
    dev = rt.to_device(np.ascontiguousarray(before.transpose((0, 2, 1)))).transpose((0, 2, 1))
    engine.grouped_matmul(rt.to_device(x), rt.to_device(w), counts=rt.to_device(counts), out=dev)
    close(rt.to_host(dev), masked_ref(x, w, counts, out=before))


# -- k (weight gradients) -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["random", "one"])
def test_k_layout(engine, rng, kind):
    counts = routing(rng, E, T, kind)
    a, dy = data(rng, (K, T)), data(rng, (T, N))
    out = engine.grouped_matmul(a, dy, offsets=offsets(counts))
    assert out.shape == (E, K, N)
    close(out, k_ref(a, dy, counts))
    # x^T as torch writes it: a transposed view of the (T, K) activations
    x = data(rng, (T, K))
    close(engine.grouped_matmul(x.T, dy, offsets=offsets(counts), bias=data(rng, (E, N)) * 0 + 1.0),
          k_ref(x.T, dy, counts, bias=np.ones((E, N))))


# -- list ---------------------------------------------------------------------------------------------
def test_list_layout(engine, rng):
    sizes = [(5, 7, 3), (0, 4, 5), (17, 33, 9), (3, 2, 0), (20, 1, 40)]
    xs = [data(rng, (m, k)) for m, n, k in sizes]
    ws = [data(rng, (k, n)) for m, n, k in sizes]
    ws[2] = np.asfortranarray(ws[2])
    outs = engine.grouped_matmul(xs, ws, alpha=2.0, activation="relu")
    assert [o.shape for o in outs] == [(m, n) for m, n, _ in sizes]
    for o, x, w in zip(outs, xs, ws):
        if o.size:
            close(o, np.maximum(2 * x.astype(np.float64) @ w, 0))
    given = [np.full((m, n), np.nan, np.float32) for m, n, _ in sizes]
    assert engine.grouped_matmul(xs, ws, out=given) is not None
    for o, x, w in zip(given, xs, ws):
        if o.size:
            close(o, x.astype(np.float64) @ w)


def test_list_layout_of_device_arrays(engine, rng):
    # CUDA reads them in place (offsets between their addresses, a transposed one copied into the
    # first's layout); OpenCL packs them
    rt = engine.runtime
    sizes = [(9, 16, 24), (33, 8, 40), (1, 24, 8)]
    xs = [data(rng, (m, k)) for m, n, k in sizes]
    ws = [data(rng, (k, n)) for m, n, k in sizes]
    dws = [rt.to_device(w) for w in ws[:2]] + [rt.to_device(np.ascontiguousarray(ws[2].T)).T]
    outs = engine.grouped_matmul([rt.to_device(x) for x in xs], dws)
    for o, x, w in zip(outs, xs, ws):
        close(rt.to_host(o), x.astype(np.float64) @ w)


# -- errors ---------------------------------------------------------------------------------------------
def test_errors_name_the_argument(engine, rng):
    x, w, offs = data(rng, (T, K)), data(rng, (E, K, N)), offsets(routing(rng, E, T))
    with pytest.raises(ValueError, match="offsets .* or counts"):
        engine.grouped_matmul(x, w)
    with pytest.raises(ValueError, match="not both"):
        engine.grouped_matmul(x, w, offsets=offs, counts=offs)
    with pytest.raises(ValueError, match="b has 4 groups"):
        engine.grouped_matmul(x, w[:4], offsets=offs)
    with pytest.raises(ValueError, match="K = 40 and b's K = 39"):
        engine.grouped_matmul(x, w[:, :39], offsets=offs)
    with pytest.raises(ValueError, match="takes a 3-D a"):
        engine.grouped_matmul(x, w, counts=offs)
    with pytest.raises(TypeError, match="offsets must hold 32- or 64-bit integers"):
        engine.grouped_matmul(x, w, offsets=offs.astype(np.float32))
    with pytest.raises(ValueError, match="bias has shape \\(4, 36\\)"):
        engine.grouped_matmul(x, w, offsets=offs, bias=data(rng, (4, N)))
    with pytest.raises(ValueError, match="row_scale has shape \\(5, 70\\)"):
        engine.grouped_matmul(x, w, offsets=offs, row_scale=data(rng, (E, T)))
    with pytest.raises(ValueError, match="scale_b has shape"):
        engine.grouped_matmul(x, w, offsets=offs, scale_b=data(rng, (3, 3)))
    with pytest.raises(TypeError, match="out must have the result dtype float32"):
        engine.grouped_matmul(data(rng, (E, 4, K)), w, counts=offs, out=np.zeros((E, 4, N), np.float64))
    with pytest.raises(ValueError, match="list layout takes alpha and activation .* not bias"):
        engine.grouped_matmul([x], [w[0]], bias=data(rng, (N,)))
    with pytest.raises(SetupError, match="walks the groups"):
        engine.matmul(x, w[0], algorithm="grouped_simple_unit")


# -- repeated calls (call/fast.py `FastPath.grouped`) ----------------------------------------------------
def test_repeated_calls_on_device_arrays_take_the_fast_path_with_new_routing(engine, rng, monkeypatch):
    rt, cap = engine.runtime, 16
    general = count_general_calls(monkeypatch)
    x, xm, w = data(rng, (T, K)), data(rng, (E, cap, K)), data(rng, (E, K, N))
    dx, dxm, dw = rt.to_device(x), rt.to_device(xm), rt.to_device(w)
    for step, kind in enumerate(["random", "one", "skewed", "balanced"]):
        counts = routing(rng, E, T, kind)
        out = engine.grouped_matmul(dx, dw, offsets=rt.to_device(offsets(counts)))
        close(rt.to_host(out), contiguous_ref(x, w, counts))
        masked = np.minimum(routing(rng, E, E * cap, kind), cap).astype(np.int32)
        got = rt.to_host(engine.grouped_matmul(dxm, dw, counts=rt.to_device(masked)))
        close(got, masked_ref(xm, w, masked))
        for g, n in enumerate(masked):       # a fresh masked result starts as zeros on the fast path too
            assert (got[g, n:] == 0).all()
    assert len(general) == 2, "the repeats of each layout's call should skip the general path"


@pytest.mark.parametrize("kind", ["device", "torch"])
def test_repeated_fused_calls_take_the_fast_path_with_each_calls_terms(engine, rng, monkeypatch, kind):
    """A fused grouped call (a per-expert bias, the routing weights as ``row_scale``, alpha, an
    activation: an MoE layer's call) repeats on the fast path, reading every call's routing, terms
    and alpha; a bias of another shape (shared, not per expert) is another call's key."""
    put, get = device_arrays(engine, kind)
    general = count_general_calls(monkeypatch)
    w = data(rng, (E, K, N))
    dw, taken = put(w), []
    for step, alpha in enumerate((1.0, 0.5, -2.0, 1.5, 1.5)):
        counts = routing(rng, E, T, ["random", "one", "skewed", "balanced", "random"][step])
        x, scale = data(rng, (T, K)), rng.random(T).astype(np.float32)
        bias = data(rng, (N,) if step == 4 else (E, N))
        before = len(general)
        got = engine.grouped_matmul(put(x), dw, offsets=put(offsets(counts)), bias=put(bias), row_scale=put(scale),
                                    alpha=alpha, activation="relu")
        close(get(got), contiguous_ref(x, w, counts, alpha=alpha, bias=bias, row_scale=scale, activation="relu"))
        cap = 16
        slab = np.minimum(routing(rng, E, E * cap), cap).astype(np.int32)
        xm = data(rng, (E, cap, K))
        got = get(engine.grouped_matmul(put(xm), dw, counts=put(slab), bias=put(bias), alpha=alpha))
        close(got, masked_ref(xm, w, slab, alpha=alpha, bias=bias))
        for g, n in enumerate(slab):       # rows past a count: zeros, the bias not added there
            assert (got[g, n:] == 0).all()
        taken.append(len(general) - before)
    assert taken[2:] == [0, 0, 2], taken


def test_repeated_calls_on_torch_cuda_tensors_take_the_fast_path(engine, rng, monkeypatch):
    torch = pytest.importorskip("torch")
    if engine.device.backend != "cuda":
        pytest.skip("torch tensors reach the device in place on CUDA only (elsewhere through the host)")
    general = count_general_calls(monkeypatch)
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
    taken = []
    for kind in ["random", "one", "skewed", "balanced"]:
        counts = routing(rng, E, T, kind)
        before = len(general)
        out = engine.grouped_matmul(tx, tw, offsets=torch.from_numpy(offsets(counts)).cuda())
        taken.append(len(general) - before)
        assert isinstance(out, torch.Tensor) and out.is_cuda
        close(out.cpu().numpy(), contiguous_ref(x, w, counts))
    # The first call (or two, in an engine that has not met torch tensors yet) takes the general
    # path and leaves the call plan; the repeats after it do not.
    assert taken[-2:] == [0, 0], taken
    # offsets on the host for device operands: the general path moves them, every time
    for _ in range(2):
        counts = routing(rng, E, T)
        before = len(general)
        close(engine.grouped_matmul(tx, tw, offsets=torch.from_numpy(offsets(counts))).cpu().numpy(),
              contiguous_ref(x, w, counts))
        assert len(general) == before + 1


# -- quantized weights ----------------------------------------------------------------------------------
def test_a_lone_quantized_weight_is_refused_by_every_grouped_layout(opencl_engine, rng):
    """One QuantizedWeight is no layer of experts: each layout says so (not a dense-problem
    SetupError or a 'numbers or an array' TypeError) and names QuantizedExperts
    (tests/test_grouped_quantized.py runs those)."""
    import gemm_engine
    q = gemm_engine.quantize(data(rng, (K, N)), "int8", None)
    x = data(rng, (T, K))
    calls = [lambda: opencl_engine.grouped_matmul(x, q, offsets=offsets([30, 40])),              # groups of K
             lambda: opencl_engine.grouped_matmul(data(rng, (2, 8, K)), q, counts=np.array([3, 8])),
             lambda: opencl_engine.grouped_matmul([x[:30], x[30:]], [q, q]),
             lambda: gemm_engine.grouped_matmul([x[:30], x[30:]], [data(rng, (K, N)), q])]
    for call in calls:
        with pytest.raises(ValueError, match="QuantizedWeight.*QuantizedExperts"):
            call()


# -- gated (SwiGLU) per group -------------------------------------------------------------------------
def test_swiglu_per_group_contiguous_with_expert_bias_and_routing_weights(engine, rng):
    counts = routing(rng, E, T)
    x, w = data(rng, (T, K)), data(rng, (E, K, N))
    terms = dict(bias=data(rng, (E, N)), row_scale=rng.random(T).astype(np.float32), activation="swiglu")
    out = engine.grouped_matmul(x, w, offsets=offsets(counts), **terms)
    assert out.shape == (T, N // 2)
    close(out, contiguous_ref(x, w, counts, **terms))
    # the weights column-major (nn.Linear's (E, N, K) rows) and a shared bias
    wt = np.ascontiguousarray(w.transpose(0, 2, 1)).transpose(0, 2, 1)
    bias = data(rng, (N,))
    close(engine.grouped_matmul(x, wt, offsets=offsets(counts), bias=bias, activation="swiglu"),
          contiguous_ref(x, w, counts, bias=bias, activation="swiglu"))


def test_swiglu_per_group_masked_keeps_a_given_outs_rows_and_reads_no_padding(engine, rng):
    cap = 12
    x, w = data(rng, (E, cap, K)), data(rng, (E, K, N))
    counts = np.array([3, 0, 12, 7, 1], np.int32)
    for g, n in enumerate(counts):
        x[g, n:] = np.nan
    terms = dict(bias=data(rng, (E, N)), row_scale=rng.random((E, cap)).astype(np.float32), activation="swiglu")
    fresh = engine.grouped_matmul(x, w, counts=counts, **terms)
    assert fresh.shape == (E, cap, N // 2)
    close(fresh, masked_ref(np.nan_to_num(x), w, counts, **terms))
    out = data(rng, (E, cap, N // 2))
    before = out.copy()
    assert engine.grouped_matmul(x, w, counts=counts, out=out, **terms) is out
    close(out, masked_ref(np.nan_to_num(x), w, counts, out=before, **terms))


def test_swiglu_per_group_needs_an_even_n_and_no_c(engine, rng):
    counts = routing(rng, E, T)
    x, w = data(rng, (T, K)), data(rng, (E, K, N + 1))
    with pytest.raises(ValueError, match="even number of columns"):
        engine.grouped_matmul(x, w, offsets=offsets(counts), activation="swiglu")
    w = data(rng, (E, K, N))
    with pytest.raises(ValueError, match="c is not supported"):
        engine.grouped_matmul(x, w, offsets=offsets(counts), activation="swiglu", c=data(rng, (T, N // 2)))


def test_swiglu_in_the_list_and_k_layouts(engine, rng):
    sizes = [(5, 8, 3), (0, 4, 5), (17, 34, 9)]
    xs = [data(rng, (m, k)) for m, n, k in sizes]
    ws = [data(rng, (k, n)) for m, n, k in sizes]
    outs = engine.grouped_matmul(xs, ws, activation="swiglu")
    assert [o.shape for o in outs] == [(m, n // 2) for m, n, _ in sizes]
    for o, x, w in zip(outs, xs, ws):
        if o.size:
            close(o, contiguous_ref(x, w[None], [len(x)], activation="swiglu"))
    with pytest.raises(ValueError, match="even number of columns"):
        engine.grouped_matmul(xs[:1], [data(rng, (3, 7))], activation="swiglu")
    counts = routing(rng, E, T)
    a, dy = data(rng, (K, T)), data(rng, (T, N))
    out = engine.grouped_matmul(a, dy, offsets=offsets(counts), activation="swiglu")
    assert out.shape == (E, K, N // 2)
    close(out, k_ref(a, dy, counts, activation="swiglu"))
