"""Quantized experts (gemm_engine.QuantizedExperts) in grouped_matmul's contiguous and masked layouts,
on every backend (PoCL in CI, the CUDA members on the GPU): every format, zeros and none, group
sizes and per-channel, odd K and N, both word layouts, routings with empty groups and every token
in one expert, per-expert bias and routing weights, a given out, against float64 references of the
dequantized weights; and the refusals that name the argument or component."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine import QuantizedExperts, quantize
from gemm_engine.errors import SetupError
from grouped_support import contiguous_ref, count_general_calls, device_arrays, masked_ref, routing
from helpers import BF16, TOLERANCE, np_dtype, rel_error

E, T = 4, 45


def experts(rng, e, k, n):
    """Rows scaled differently per expert (a wrong expert's or group's scale shows in the result)."""
    return rng.standard_normal((e, k, n)) * rng.uniform(0.05, 20.0, size=(e, k, 1))


def offsets(counts):
    return np.cumsum(counts).astype(np.int32)


def close(result, ref, dtype):
    err = rel_error(result, ref)
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e} > {TOLERANCE[dtype]:.1e} for {dtype}"


#: (format, symmetric, group, K, N, activation dtype): K off the group and the word, odd N,
#: per-channel scales, every kind.
CASES = [("int4", True, 32, 100, 37, "float32"), ("int4", False, 64, 128, 70, "bfloat16"),
         ("int8", True, None, 66, 17, "float16"), ("fp8_e4m3", True, 32, 64, 30, "float32")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_contiguous_every_format(engine, rng, case):
    kind, symmetric, group, k, n, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    q = quantize(experts(rng, E, k, n), kind, group, symmetric)
    assert isinstance(q, QuantizedExperts) and q.shape == (E, k, n)
    counts = routing(rng, E, T)
    counts[0], counts[1] = counts[0] + counts[1], 0        # an empty expert among them
    x = rng.standard_normal((T, k)).astype(np_dtype(dtype))
    out = engine.grouped_matmul(x, q, offsets=offsets(counts))
    assert out.dtype == x.dtype and out.shape == (T, n)
    close(out, contiguous_ref(x, q.dequantize(), counts), dtype)


@pytest.mark.parametrize("kind", ["one", "skewed"])
def test_contiguous_routings_with_bias_and_routing_weights(engine, rng, kind):
    q = quantize(experts(rng, E, 96, 40), "int4", 32, False)
    counts = routing(rng, E, T, kind)
    x = rng.standard_normal((T, 96)).astype(np.float32)
    bias, scale = rng.standard_normal((E, 40)).astype(np.float32), rng.random(T).astype(np.float32)
    out = engine.grouped_matmul(x, q, offsets=offsets(counts), bias=bias, row_scale=scale)
    close(out, contiguous_ref(x, q.dequantize(), counts, bias=bias, row_scale=scale), "float32")


@pytest.mark.parametrize("kind", ["int4", "int8"])
def test_swiglu_per_expert_with_bias_and_routing_weights(engine, rng, kind):
    """An MoE up projection in one launch: gate and up columns interleaved in each expert, the
    routing weight applied to the gated value; contiguous (decode and prefill sizes) and masked."""
    q = quantize(experts(rng, E, 128, 48), kind, 32, False)
    for tokens in (6, 70):
        counts = routing(rng, E, tokens)
        x = (rng.standard_normal((tokens, 128)) * 0.02).astype(np.float16)     # gate * up within float16
        terms = dict(bias=rng.standard_normal((E, 48)).astype(np.float16),
                     row_scale=rng.random(tokens).astype(np.float32), activation="swiglu")
        out = engine.grouped_matmul(x, q, offsets=offsets(counts), **terms)
        assert out.shape == (tokens, 24)
        close(out, contiguous_ref(x, q.dequantize(), counts, **terms), "float16")
    slab = np.array([1, 8, 0, 5], np.int32)
    xm = (rng.standard_normal((E, 8, 128)) * 0.02).astype(np.float16)
    xm[np.arange(8)[None, :] >= slab[:, None]] = np.nan
    live = (np.arange(8)[None, :] < slab[:, None])[..., None]
    got = np.asarray(engine.grouped_matmul(xm, q, counts=slab, activation="swiglu"))
    assert got.shape == (E, 8, 24) and (got[~live[..., 0]] == 0).all()
    ref = masked_ref(np.nan_to_num(xm), q.dequantize(), slab, activation="swiglu")
    close(np.where(live, got, 0), np.where(live, ref, 0), "float16")


def test_masked_rows_past_the_counts(engine, rng):
    """Rows at or past a count are zeros in a fresh result and left as they were in a given out;
    their inputs (NaN here) never reach a result."""
    q = quantize(experts(rng, E, 64, 24), "int8", 32)
    counts = np.array([3, 8, 0, 1], np.int32)
    x = rng.standard_normal((E, 8, 64)).astype(np.float16)
    x[np.arange(8)[None, :] >= counts[:, None]] = np.nan
    bias = rng.standard_normal((E, 24)).astype(np.float16)
    ref = masked_ref(x, q.dequantize(), counts, bias=bias)
    live = np.arange(8)[None, :] < counts[:, None]
    out = engine.grouped_matmul(x, q, counts=counts, bias=bias)
    assert (np.asarray(out)[~live] == 0).all()
    close(np.where(live[..., None], out, 0), np.where(live[..., None], ref, 0), "float16")
    given = np.full((E, 8, 24), 7.0, np.float16)
    engine.grouped_matmul(x, q, counts=counts, bias=bias, out=given)
    assert (given[~live] == 7).all()
    close(np.where(live[..., None], given, 0), np.where(live[..., None], ref, 0), "float16")


@pytest.mark.parametrize("algorithm", ["grouped_quantized_decode", "grouped"])
def test_prepacked_experts(engine, rng, algorithm):
    """The prepacked word layout (a strip per 64 columns) moved per expert as the k_packed one; the
    decode member (its plane product emulated on OpenCL) in both layouts."""
    q = quantize(experts(rng, E, 256, 72), "int4", 128, False)
    packed = QuantizedExperts([q[e].prepack() for e in range(E)])
    assert packed.format.layout == "prepacked"
    np.testing.assert_array_equal(packed.dequantize(), q.dequantize())
    x = rng.standard_normal((E, 24, 256)).astype(np.float16)     # 3 tiles of 8 rows: those past a count skipped
    counts = np.array([3, 24, 0, 9], np.int32)
    live = (np.arange(24)[None, :] < counts[:, None])[..., None]
    ref = np.where(live, masked_ref(x, q.dequantize(), counts), 0)
    for weights in (q, packed):
        out = engine.grouped_matmul(x, weights, counts=counts, algorithm=algorithm)
        close(out, ref, "float16")
    rows = np.array([2, 0, 1, 3])
    xc = rng.standard_normal((6, 256)).astype(np.float16)
    close(engine.grouped_matmul(xc, packed, offsets=offsets(rows), algorithm=algorithm),
          contiguous_ref(xc, q.dequantize(), rows), "float16")


@pytest.mark.parametrize("row_tiles", [1, 2, 4])
def test_decode_row_tiles_against_group_sizes(engine, rng, row_tiles):
    """The decode member's row tile (``row_tiles`` x 8 rows) against groups smaller than it, larger
    (more tiles, each a pass over the expert's weights) and empty, contiguous and masked: the tiles
    past a group's rows (their products skipped on CUDA) write nothing, the rows inside all."""
    if engine.runtime.backend != "cuda" and row_tiles != 2:
        pytest.skip("PoCL builds each emulated decode kernel in about 15 s: its default tile (2) only")
    q = quantize(experts(rng, E, 128, 40), "int4", 32, False)
    alg = gemm_engine.algorithms.REGISTRY["grouped_quantized_decode"](row_tiles=row_tiles)
    counts = np.array([3, 0, 20, 9])
    x = rng.standard_normal((counts.sum(), 128)).astype(np.float16)
    close(engine.grouped_matmul(x, q, offsets=offsets(counts), algorithm=alg),
          contiguous_ref(x, q.dequantize(), counts), "float16")
    slab = np.array([1, 24, 0, 17], np.int32)
    xm = rng.standard_normal((E, 24, 128)).astype(np.float16)
    live = (np.arange(24)[None, :] < slab[:, None])[..., None]
    got = np.asarray(engine.grouped_matmul(xm, q, counts=slab, algorithm=alg))
    assert (got[~live[..., 0]] == 0).all()
    close(np.where(live, got, 0), np.where(live, masked_ref(xm, q.dequantize(), slab), 0), "float16")


def test_experts_are_one_format_and_shape(rng):
    a = quantize(rng.standard_normal((64, 16)), "int4", 32)
    with pytest.raises(ValueError, match="expert 1's format"):
        QuantizedExperts([a, quantize(rng.standard_normal((64, 16)), "int8", 32)])
    with pytest.raises(ValueError, match="expert 1's shape"):
        QuantizedExperts([a, quantize(rng.standard_normal((64, 24)), "int4", 32)])
    with pytest.raises(TypeError, match="sequence of QuantizedWeight"):
        QuantizedExperts([])
    q = QuantizedExperts([a, a])
    np.testing.assert_array_equal(q[1].dequantize(), a.dequantize())
    assert q.nbytes == 2 * a.nbytes and q.shape == (2, 64, 16)
    w = rng.standard_normal((2, 64, 16))                # quantize of (E, K, N): one weight per expert
    stacked = quantize(w, "int4", 32, False)
    for e in range(2):
        np.testing.assert_array_equal(stacked[e].dequantize(), quantize(w[e], "int4", 32, False).dequantize())


def test_refusals_name_what_to_pass(opencl_engine, rng):
    q = quantize(experts(rng, 2, 64, 16), "int4", 32)
    x = rng.standard_normal((10, 64)).astype(np.float32)
    with pytest.raises(TypeError, match="QuantizedExperts.*grouped_matmul"):
        opencl_engine.matmul(x, q)
    with pytest.raises(ValueError, match="QuantizedWeight.*QuantizedExperts"):      # one weight, offsets over K
        opencl_engine.grouped_matmul(x, q[0], offsets=offsets([4, 6]))
    with pytest.raises(ValueError, match="QuantizedExperts"):
        opencl_engine.grouped_matmul([x, x], [q[0], q[1]])
    with pytest.raises(ValueError, match="b has 2 groups"):
        opencl_engine.grouped_matmul(x, q, offsets=offsets([4, 3, 3]))
    with pytest.raises(SetupError, match="quantized"):                   # a dense member named
        opencl_engine.grouped_matmul(x, q, offsets=offsets([4, 6]), algorithm="grouped_simple_unit")
    with pytest.raises(SetupError, match="dense"):                       # a quantized member, dense weights
        opencl_engine.grouped_matmul(x, q.dequantize(), offsets=offsets([4, 6]),
                                     algorithm="grouped_quantized_simple_unit")


@pytest.mark.parametrize("algorithm", ["grouped_quantized_wgmma", "grouped_quantized_double_buffering_mma", "grouped"])
def test_tensor_core_members(engine, rng, algorithm):
    """The CUDA members at prefill sizes (a group's rows past the decode kernel's): wgmma with the
    weights in its register operand (Hopper) and the mma.sync loader path, contiguous and masked,
    with a per-expert bias and routing weights."""
    if engine.runtime.backend != "cuda":
        pytest.skip("the tensor-core members run on CUDA (OpenCL runs the register-FMA member above)")
    e, k, n = 6, 512, 200
    q = quantize(experts(rng, e, k, n) * 0.05, "int4", 128, False)
    counts = routing(rng, e, 600)
    counts[2], counts[3] = counts[2] + counts[3], 0
    x = rng.standard_normal((600, k)).astype(np.float16)
    bias, scale = rng.standard_normal((e, n)).astype(np.float16), rng.random(600).astype(np.float32)
    try:
        out = engine.grouped_matmul(x, q, offsets=offsets(counts), bias=bias, row_scale=scale, algorithm=algorithm)
    except SetupError as exc:
        pytest.skip(f"{algorithm} does not run on this device: {exc}")
    close(out, contiguous_ref(x, q.dequantize(), counts, bias=bias, row_scale=scale), "float16")
    slab = np.minimum(routing(rng, e, 6 * 100), 128).astype(np.int32)
    xm = rng.standard_normal((e, 128, k)).astype(np.float16)
    live = (np.arange(128)[None, :] < slab[:, None])[..., None]
    got = engine.grouped_matmul(xm, q, counts=slab, algorithm=algorithm)
    assert (np.asarray(got)[~live[..., 0]] == 0).all()
    close(np.where(live, got, 0), np.where(live, masked_ref(xm, q.dequantize(), slab), 0), "float16")


# -- repeated calls (call/fast.py `FastPath.grouped`) ----------------------------------------------------
@pytest.mark.parametrize("kind", ["device", "torch"])
def test_repeated_calls_take_the_fast_path_with_new_routing_and_experts(engine, rng, monkeypatch, kind):
    """A quantized-experts call's repeats skip the general path (its host time was most of a decode
    layer's), read each call's routing and activations, and name their experts: other experts of
    the same format and shape take the general path once and give their own product."""
    put, get = device_arrays(engine, kind)
    general = count_general_calls(monkeypatch)
    e, k, n, cap = 4, 128, 40, 8
    q = quantize(experts(rng, e, k, n), "int4", 32, False)
    other = quantize(experts(rng, e, k, n), "int4", 32, False)
    taken = []
    for step, route in enumerate(["random", "one", "skewed", "balanced", "random"]):
        weights = other if step == 4 else q
        counts = routing(rng, e, 21, route)
        x = rng.standard_normal((21, k)).astype(np.float16)
        before = len(general)
        got = get(engine.grouped_matmul(put(x), weights, offsets=put(offsets(counts))))
        close(got, contiguous_ref(x, weights.dequantize(), counts), "float16")
        slab = np.minimum(routing(rng, e, e * cap, route), cap).astype(np.int32)
        xm = rng.standard_normal((e, cap, k)).astype(np.float16)
        got = get(engine.grouped_matmul(put(xm), weights, counts=put(slab)))
        live = (np.arange(cap)[None, :] < slab[:, None])[..., None]
        assert (got[~live[..., 0]] == 0).all()        # a fresh masked result starts as zeros here too
        close(np.where(live, got, 0), np.where(live, masked_ref(xm, weights.dequantize(), slab), 0), "float16")
        taken.append(len(general) - before)
    # The first call of each layout (or two, in an engine that has not met torch tensors yet) takes
    # the general path and leaves its call plan; the repeats do not; other experts start again.
    assert taken[2:] == [0, 0, 2], taken
