"""torch/dequantize.py: quantized weights expanded by torch's kernels on their tensors' device (what
a quantized product's backward multiplies by) equal `QuantizedWeight.dequantize` exactly, for every
format, group size, zeros and none, both word layouts, scale types and stacked experts."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed here")

import gemm_engine  # noqa: E402
from gemm_engine.torch.dequantize import dequantized_weight  # noqa: E402

CASES = [("int4", 32, True, "bfloat16"), ("int4", 128, False, "float16"), ("int4", None, False, "bfloat16"),
         ("int8", 64, True, "float16"), ("int8", None, False, "bfloat16"), ("fp8_e4m3", 32, True, "bfloat16")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_values_equal_dequantize_exactly(case):
    kind, group, symmetric, scale = case
    pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(7)
    for k, n in ((100, 37), (256, 70)):               # K off the group and the word, odd N
        q = gemm_engine.quantize(rng.standard_normal((k, n)) * rng.uniform(0.1, 5, (k, 1)), kind, group, symmetric,
                                 scale_dtype=scale)
        for w in (q, q.prepack()):
            got = dequantized_weight(w, torch.device("cpu"), torch.float32)
            assert got.shape == (k, n) and np.array_equal(got.numpy(), w.dequantize()), w.format
    experts = gemm_engine.quantize(rng.standard_normal((3, 300, 40)), kind, group, symmetric)
    for stacked in (experts, gemm_engine.QuantizedExperts([experts[e].prepack() for e in range(3)])):
        got = dequantized_weight(stacked, torch.device("cpu"), torch.bfloat16)
        want = torch.from_numpy(stacked.dequantize()).to(torch.bfloat16)
        assert got.dtype == torch.bfloat16 and torch.equal(got, want), stacked.format


def test_a_modules_dequantized_weight_is_its_buffers_values():
    layer = torch.nn.Linear(96, 40)
    q = gemm_engine.torch.QuantizedLinear.from_linear(layer, "int4", group_size=32)
    want = q.quantized_weight().dequantize().T
    got = q.dequantized_weight()
    assert got.shape == (40, 96) and got.is_contiguous() and np.array_equal(got.numpy(), want)
