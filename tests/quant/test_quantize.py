"""quantize: each format's grid against the float weight it came from, its refusals, its inputs."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine.quant import QuantizedWeight, quantize
from helpers import BF16


def weight(rng, k, n):
    """Standard-normal weights with each row scaled differently (groups then differ a lot, so a
    wrong group's scale would show)."""
    return (rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))).astype(np.float32)


def _per_row(q: QuantizedWeight, table):
    g = q.format.group_size or q.k
    return np.repeat(table, g, axis=0)[: q.k]


@pytest.mark.parametrize("group", [32, 64, 128, None])
@pytest.mark.parametrize("kind, symmetric", [("int4", True), ("int4", False), ("int8", True), ("int8", False),
                                             ("fp8_e4m3", True)])
def test_values_lie_on_the_nearest_grid_point(rng, kind, symmetric, group):
    w = weight(rng, 200, 37)        # 200: a short last group for 32 / 64 / 128
    q = quantize(w, kind, group, symmetric)
    assert q.shape == (200, 37) and q.format.kind == kind and q.format.zeros == (not symmetric)
    deq = q.dequantize()
    scale = _per_row(q, q.scale_values())
    if kind == "fp8_e4m3":
        # e4m3 keeps 3 mantissa bits: half a unit in the last place is 2^-4 of the value (plus subnormals)
        assert np.all(np.abs(deq - w) <= np.abs(w) / 16 + scale * 2.0 ** -9 + 1e-12)
        assert np.all(np.abs(w / scale) <= 448 * (1 + 2 ** -10))
    else:
        err = np.abs(deq - w) / scale
        if symmetric:
            assert err.max() <= 0.5 + 1e-6
        else:   # a rounded zero point can push the range's top half a step past the last code
            assert err.max() <= 1.0 + 1e-6 and err.mean() < 0.3
        codes, zero = q.codes(), q.zero_values()
        assert codes.max() <= q.format.mask
        if symmetric:
            assert np.all(zero == q.format.implicit_zero)


def test_dequantize_is_exact_and_rounds_on_request(rng):
    q = quantize(weight(rng, 64, 16), "int4", 32, symmetric=False)
    codes = q.codes().astype(np.float64)
    exact = (codes - _per_row(q, q.zero_values())) * _per_row(q, q.scale_values())
    np.testing.assert_array_equal(q.dequantize(), exact.astype(np.float32))
    np.testing.assert_array_equal(q.dequantize(rounded_to="float16"), exact.astype(np.float16).astype(np.float32))


def test_scale_dtype_follows_the_weight(rng):
    w = weight(rng, 32, 8)
    assert quantize(w, "int8").scale_dtype == np.float16
    if BF16 is not None:
        assert quantize(w.astype(BF16), "int8").scale_dtype == BF16
        assert quantize(w, "int8", scale_dtype="bfloat16").format.scale == "bf16_bits"


def test_torch_weights_quantize_like_numpy(rng):
    torch = pytest.importorskip("torch")
    w = weight(rng, 64, 24)
    a = quantize(torch.from_numpy(w), "int4", 32)
    b = quantize(w, "int4", 32)
    np.testing.assert_array_equal(a.packed, b.packed)
    assert quantize(torch.from_numpy(w).to(torch.bfloat16), "int4", 32).format.scale == "bf16_bits"


def test_an_all_zero_group_and_a_group_past_k(rng):
    w = weight(rng, 40, 5)
    w[:32] = 0.0
    q = quantize(w, "int4", 32, symmetric=False)
    np.testing.assert_array_equal(q.dequantize()[:32], 0.0)
    assert q.scale_values().shape == (2, 5)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(format="int2"), ValueError, "format"),
    (dict(format="int4", group_size=12), ValueError, "multiple of the 8"),
    (dict(format="int8", group_size=0.5), ValueError, "group_size"),
    (dict(format="fp8_e4m3", symmetric=False), ValueError, "symmetric"),
    (dict(format="int4", scale_dtype="float32"), ValueError, "float16 or bfloat16"),
])
def test_refusals_say_why(rng, kwargs, error, words):
    with pytest.raises(error, match=words):
        quantize(weight(rng, 64, 8), **kwargs)


def test_weights_must_be_a_finite_matrix(rng):
    with pytest.raises(ValueError, match="matrix"):
        quantize(np.ones(8, np.float32))
    bad = weight(rng, 8, 8)
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="not finite"):
        quantize(bad)


def test_the_public_names():
    assert gemm_engine.quantize is quantize and gemm_engine.QuantizedWeight is QuantizedWeight
    assert callable(gemm_engine.quantized_matmul) and callable(gemm_engine.from_gptq)
