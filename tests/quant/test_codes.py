"""Packing codes into words and back, in both layouts, for every code width and ragged shape."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.quant import codes as C
from gemm_engine.quant.format import WeightFormat


@pytest.mark.parametrize("layout", ["k_packed", "prepacked"])
@pytest.mark.parametrize("kind", ["int4", "int8"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (8, 4), (33, 65), (128, 70)])
def test_pack_unpack_round_trip(rng, kind, layout, shape):
    fmt = WeightFormat(kind, layout=layout)
    codes = rng.integers(0, fmt.mask + 1, size=shape).astype(np.uint8)
    words = C.pack(codes, fmt)
    assert words.dtype == np.uint32
    np.testing.assert_array_equal(C.unpack(words, fmt, *shape), codes)
    k, n = shape
    kw = -(-k // fmt.per_word)
    if layout == "k_packed":
        assert words.shape == (kw, C.round_up(n, 4))
        # GPTQ's bit order: row kw * per_word + j of column c in bits [bits * j, bits * (j + 1))
        j, c = (k - 1) % fmt.per_word, n - 1
        assert (int(words[(k - 1) // fmt.per_word, c]) >> (fmt.bits * j)) & fmt.mask == codes[k - 1, c]
        assert not words[:, n:].any()     # padding columns hold zero codes
    else:
        assert words.shape == (-(-n // 64), C.round_up(kw, 4), 64)


def test_codes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="do not fit 4 bits"):
        C.pack(np.array([[16]], np.uint8), WeightFormat("int4"))


def test_sixteen_bit_and_fp8_encodings():
    v = np.array([1.0, -2.5, 65504.0, 3.0e-5], np.float32)
    np.testing.assert_array_equal(C.from_bits16(C.to_bits16(v, "f16_bits"), "f16_bits"), v.astype(np.float16))
    assert C.round16(np.float32(1.00390625), "bf16_bits") == np.float32(1.0)        # ties to even
    codes = C.fp8_codes(np.array([448.0, 500.0, -1.0, 0.005859375]))
    np.testing.assert_array_equal(C.fp8_values(codes), [448.0, 448.0, -1.0, 0.005859375])   # clipped, subnormal exact
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        C.scale_word("float32")
