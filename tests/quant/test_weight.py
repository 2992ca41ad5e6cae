"""QuantizedWeight: its invariants, the prepacked layout, the bytes it streams, its device copies."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.quant import QuantizedWeight, WeightFormat, quantize
from gemm_engine.quant import codes as C


def test_prepack_keeps_the_values(rng):
    for kind in ("int4", "int8", "fp8_e4m3"):
        q = quantize(rng.standard_normal((77, 70)), kind, 32 if kind != "fp8_e4m3" else None)
        p = q.prepack()
        assert p.format.layout == "prepacked" and p.prepack() is p and p.ld == 64
        np.testing.assert_array_equal(p.dequantize(), q.dequantize())
        assert p.packed.shape == (2, C.round_up(-(-77 // q.format.per_word), 4), 64)


def test_nbytes_counts_the_codes_scales_and_zeros(rng):
    q = quantize(rng.standard_normal((4096, 256)), "int4", 128, symmetric=False)
    assert q.nbytes == 4096 * 256 // 2 + 2 * 32 * 256 * 2


def test_arrays_are_read_only_copies(rng):
    q = quantize(rng.standard_normal((16, 8)), "int8")
    with pytest.raises(ValueError):
        q.packed[0, 0] = 1


@pytest.mark.parametrize("change, words", [
    (lambda a: dict(a, packed=a["packed"][:, :4]), "k_packed words"),
    (lambda a: dict(a, scales=a["scales"][:1]), "scales must be"),
    (lambda a: dict(a, zeros=None), "zeros"),
    (lambda a: dict(a, zeros=np.full_like(a["zeros"], 0x3C01)), "whole numbers"),   # 1.0009765625
    (lambda a: dict(a, scales=np.full_like(a["scales"], 0x7C00)), "finite"),       # +inf
])
def test_constructor_checks_the_arrays(rng, change, words):
    q = quantize(rng.standard_normal((64, 16)), "int4", 32, symmetric=False)
    args = dict(packed=q.packed, scales=q.scales, zeros=q.zeros)
    with pytest.raises(ValueError, match=words):
        QuantizedWeight(q.format, 64, 16, **change(args))


def test_device_copies_are_made_once_per_runtime(opencl_engine, rng):
    q = quantize(rng.standard_normal((32, 16)), "int4", 32)
    rt = opencl_engine.runtime
    first = q.device(rt)
    assert q.device(rt) is first and first.shape == (32, 16) and first.ld == q.packed.shape[1]
    np.testing.assert_array_equal(rt.download(first.packed, np.uint32), q.packed)


def test_repr_names_the_format(rng):
    text = repr(quantize(rng.standard_normal((64, 8)), "int4", None, symmetric=False))
    assert "int4" in text and "per-channel" in text and "asymmetric" in text
    assert WeightFormat("int4") == quantize(rng.standard_normal((64, 8)), "int4", None).format
