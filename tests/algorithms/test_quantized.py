"""Quantized weights through the dequantizing loader (quantized_simple_unit, and the mma.sync
compositions on CUDA) and through quantized_matmul's whole call: every format, group size, zeros
and no zeros, odd K and N, every activation dtype, batch, epilogue, against float64 references of
the dequantized weights; the refusals of the compositions that cannot run them."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine.errors import SetupError
from gemm_engine.quant import quantize
from helpers import BF16, TOLERANCE, np_dtype, rel_error


def weight(rng, k, n):
    """Rows scaled differently (so a wrong group's scale shows in the result)."""
    return rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))


def check(result, x, q, dtype: str, expect=None):
    """``result`` against float64 ``x @ q.dequantize()`` (the exact values) within the dtype's
    tolerance; tensor-core paths round each weight once to x's type, well inside it."""
    ref = expect if expect is not None else np.asarray(x, np.float64) @ q.dequantize().astype(np.float64)
    err = rel_error(result, ref)
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e} > {TOLERANCE[dtype]:.1e} for {dtype}"
    return err


#: (format, symmetric, group, K, N, activation dtype): each axis covered with few kernels
#: (each costs a PoCL compile): K not a multiple of the group or of a word, odd N, per-channel.
CASES = [
    ("int4", True, 32, 100, 37, "float32"),
    ("int4", False, 64, 200, 70, "bfloat16"),
    ("int4", False, None, 77, 33, "float16"),
    ("int4", True, 128, 256, 65, "float16"),
    ("int8", True, 128, 130, 40, "bfloat16"),
    ("int8", False, None, 66, 17, "float32"),
    ("int8", False, 32, 96, 24, "float16"),
    ("fp8_e4m3", True, None, 72, 41, "bfloat16"),
    ("fp8_e4m3", True, 32, 64, 30, "float32"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_simple_unit_every_format(engine, rng, case):
    kind, symmetric, group, k, n, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    q = quantize(weight(rng, k, n), kind, group, symmetric)
    if k % 2:
        q = q.prepack()     # both layouts, alternating
    x = rng.standard_normal((5, k)).astype(np_dtype(dtype))
    y = engine.quantized_matmul(x, q, algorithm="quantized_simple_unit")
    assert y.dtype == np_dtype(dtype) and y.shape == (5, n)
    check(y, x, q, dtype)


def test_a_wrong_group_would_fail(opencl_engine, rng):
    # The check is sharp: the same weights with the groups' scales swapped are far outside it.
    q = quantize(weight(rng, 64, 16), "int4", 32)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    y = opencl_engine.quantized_matmul(x, q, algorithm="quantized_simple_unit")
    wrong = q.dequantize().astype(np.float64)
    wrong[:32] *= (q.scale_values()[1] / q.scale_values()[0])
    assert rel_error(y, x.astype(np.float64) @ wrong) > 100 * TOLERANCE["float32"]


def test_batch_is_folded_and_epilogue_fused(opencl_engine, rng):
    e = opencl_engine
    q = quantize(weight(rng, 48, 20), "int4", 16 * 2, symmetric=False)
    x = rng.standard_normal((2, 3, 48)).astype(np.float32)
    bias = rng.standard_normal(20).astype(np.float32)
    y = e.quantized_matmul(x, q, alpha=0.5, bias=bias, activation="relu")
    w = q.dequantize().astype(np.float64)
    check(y, x, q, "float32", np.maximum(0.5 * (x.astype(np.float64) @ w) + bias, 0.0))
    assert e.last_choice[1].batch.global_.weights == q.format
    assert getattr(e.last_choice[1].batch.global_.stage, "stage_m", 0) and y.shape == (2, 3, 20)


def test_unfolded_batch_c_out_and_vector(opencl_engine, rng):
    e = opencl_engine
    q = quantize(weight(rng, 40, 12), "int8", None)
    x = rng.standard_normal((3, 2, 40)).astype(np.float32)
    c = rng.standard_normal((3, 2, 12)).astype(np.float32)      # c keeps the batch unfolded
    out = np.full((3, 2, 12), np.nan, np.float32)
    y = e.quantized_matmul(x, q, c=c, beta=2.0, out=out)
    assert y is out
    check(y, x, q, "float32", x.astype(np.float64) @ q.dequantize().astype(np.float64) + 2.0 * c)
    v = rng.standard_normal(40).astype(np.float32)
    check(e.quantized_matmul(v, q), v, q, "float32")
    y16 = e.quantized_matmul(x.astype(np.float16), q, out_dtype=np.float32)
    assert y16.dtype == np.float32
    check(y16, x.astype(np.float16), q, "float16")


def test_auto_takes_the_register_path_on_opencl(opencl_engine, rng):
    q = quantize(weight(rng, 64, 16), "int4", 32)
    x = rng.standard_normal((2, 64)).astype(np.float16)
    check(gemm_engine.Engine("opencl", use_tuning_cache=False).quantized_matmul(x, q), x, q, "float16")
    text = str(opencl_engine.explain(gemm_engine.MatmulProblem(
        1, 2, 16, 64, *(gemm_engine.dtypes.FLOAT16,) * 3, weights=q.format)))
    assert "quantized_simple_unit" in text and "emulated" in text


def test_refusals(opencl_engine, rng):
    e = opencl_engine
    q = quantize(weight(rng, 32, 8), "int4", 32)
    x = rng.standard_normal((2, 32)).astype(np.float32)
    with pytest.raises(SetupError, match="dequantizing loader"):
        e.quantized_matmul(x, q, algorithm="simple_unit")
    with pytest.raises(SetupError, match="quantized weights"):
        e.matmul(x, x.T.copy(), algorithm="quantized_simple_unit")
    with pytest.raises(SetupError, match="does not pass quantized"):
        e.quantized_matmul(x, q, algorithm="specialized_wgmma")
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        e.quantized_matmul(x.astype(np.float64), q)
    with pytest.raises(TypeError, match="QuantizedWeight"):
        e.quantized_matmul(x, q.dequantize())
    with pytest.raises(ValueError, match="scale_a"):
        e.matmul(x, q, scale_a=2.0)
    with pytest.raises(ValueError, match="tune"):
        e.matmul(x, q, tune=True)
    with pytest.raises(ValueError, match="mismatch"):
        e.quantized_matmul(x[:, :16], q)


@pytest.mark.parametrize("name", ["quantized_double_buffering_mma", "quantized_simple_mma"])
@pytest.mark.parametrize("case", [("int4", False, 128, 300, 70, "bfloat16"), ("int8", True, None, 77, 33, "float16"),
                                  ("fp8_e4m3", True, 32, 96, 129, "bfloat16")], ids=lambda c: "-".join(map(str, c)))
def test_mma_compositions(engine, rng, name, case):
    """The dequantizing loader under mma.sync tiles (CUDA sm_80+): each weight rounded once to x's
    type in shared memory; refused elsewhere with the tile's reason."""
    kind, symmetric, group, k, n, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    q = quantize(weight(rng, k, n), kind, group, symmetric)
    x = rng.standard_normal((130, k)).astype(np_dtype(dtype))
    try:
        y = engine.quantized_matmul(x, q, algorithm=name)
    except SetupError as exc:
        if engine.backend == "cuda" and (engine.device.compute_capability or (0, 0)) >= (8, 0):
            raise
        pytest.skip(f"{name} does not run on {engine.backend}: {exc.reason}")
    check(y, x, q, dtype, np.asarray(x, np.float64) @ q.dequantize(rounded_to=dtype).astype(np.float64))
