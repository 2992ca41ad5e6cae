"""A quantized weight read transposed (``W.T``, `TransposedQuantizedWeight`): the (N, K) ``b`` of a
backward's ``gy @ W^T``, through the dequantizing pass (batch/dequantize_first.py), whose copy the dense kernel
reads row-major.

Checked bit for bit as the pass is (tests/batch/test_dequantize_first.py): x the identity (N x N),
so ``x @ W^T`` is each value of W^T rounded once to x's type, which a wrong extent, pitch, code,
group, layout or row past K would change; then random activations with a batch and the fused
epilogue against float64, the view's own surface, the refusals of every level that reads packed
codes along K, auto's choices, and the CUDA sources (nvcc)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cuda_compile import assert_no_spills, jobs_by_suffix, prefetched
from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant import WeightFormat, quantize
from helpers import BF16, TOLERANCE, np_dtype, rel_error

from pass_cases import CASES, FULL, run_or_skip, weight

SM90, SM80 = dialect_for(nominal_cuda_device(9, 0)), dialect_for(nominal_cuda_device(8, 0))


@pytest.mark.parametrize("name, case", [pytest.param(name, case, id=f"{name}-" + "-".join(map(str, case)))
                                        for name in FULL for case in CASES])
def test_the_transposed_weight_is_each_value_rounded_once(engine, rng, name, case):
    kind, symmetric, group, k, n, layout, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    q = quantize(weight(rng, k, n), kind, group, symmetric, scale_dtype="bfloat16" if k % 2 else "float16")
    q = q.prepack() if layout == "prepacked" else q
    x = np.eye(n, dtype=np_dtype(dtype))
    y = run_or_skip(engine, x, q.T, name)
    assert engine.last_choice[0].name == name and y.shape == (n, k) and y.dtype == np_dtype(dtype)
    expect = q.dequantize(rounded_to=None if dtype == "float32" else dtype).T
    np.testing.assert_array_equal(np.asarray(y, np.float32), expect)


@pytest.mark.parametrize("name", FULL)
def test_batch_and_fused_epilogue_by_default(engine, rng, name):
    q = quantize(weight(rng, 200, 72), "int4", 64, symmetric=False).prepack()
    x = rng.standard_normal((2, 70, 72)).astype(np.float16)      # x's last axis: the weight's N
    bias = rng.standard_normal(200).astype(np.float32)
    w = q.dequantize(rounded_to="float16").astype(np.float64).T
    for algorithm in (name, None):                               # None: auto's choice
        if algorithm is not None and engine.backend == "opencl" and algorithm != "dequantized_simple_unit":
            continue
        y = (run_or_skip(engine, x, q.T, algorithm, alpha=0.5, bias=bias, activation="relu") if algorithm
             else engine.quantized_matmul(x, q.T, alpha=0.5, bias=bias, activation="relu"))
        assert y.shape == (2, 70, 200)
        assert rel_error(y, np.maximum(0.5 * (x.astype(np.float64) @ w) + bias, 0.0)) <= TOLERANCE["float16"]
        assert engine.last_choice[0].name.startswith("dequantized_")


def test_the_view_shares_the_weight():
    rng = np.random.default_rng(0)
    q = quantize(weight(rng, 96, 40), "int8", 32)
    t = q.T
    assert t is q.T and t.T is q and t.shape == (40, 96) and (t.k, t.n) == (96, 40)
    assert t.packed is q.packed and t.scales is q.scales and t.format == replace(q.format, transposed=True)
    np.testing.assert_array_equal(t.dequantize(), q.dequantize().T)
    np.testing.assert_array_equal(t.codes(), q.codes().T)
    assert t.prepack().T.format.layout == "prepacked" and repr(t) == repr(q) + ".T"


def _problem(m=2048, n=4096, k=14336, fmt=WeightFormat("int4", 128, True, "bf16_bits", "prepacked",
                                                          transposed=True)):
    """gy (M, N_w) @ W^T: the product's K is the weight's N, its N the weight's K."""
    return MatmulProblem(1, m, n, k, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, weights=fmt)


@pytest.mark.parametrize("name", ["quantized_decode", "quantized_wgmma", "quantized_double_buffering_mma",
                                  "quantized_simple_unit", "quantized_specialized_wgmma"])
def test_levels_reading_codes_along_k_refuse_it(name):
    with pytest.raises(SetupError, match="transposed weight"):
        REGISTRY[name]().setup(_problem(m=16 if "decode" in name else 256), SM90)


def test_auto_takes_the_pass_at_every_size():
    for m in (1, 16, 256, 4096):
        name = REGISTRY["auto"]().resolve_member(_problem(m=m), SM90)[0].name
        assert name.startswith("dequantized_") and "wgmma" in name, (m, name)
    assert REGISTRY["auto"]().resolve_member(_problem(m=64), SM80)[0].name == "dequantized_pipelined_mma"
    # the copy is the dense kernel's row-major rhs: rows of the weight's N (the product's K) of its K
    cfg = REGISTRY["dequantized_specialized_wgmma"]().setup(_problem(k=4100, n=300), SM90)
    assert cfg.batch.mn_major_copies == ("rhs",) and cfg.batch.global_.rhs_loader.operand.layout is Layout.ROW
    assert cfg.batch.k_ragged   # the weight's K (300) ends inside a 16-byte piece


def cuda_sources() -> dict:
    out = {}
    for name, kind, group, layout, et, (n, k), cc in [
            ("dequantized_specialized_wgmma", "int4", 128, "prepacked", BFLOAT16, (4096, 14336), (9, 0)),
            ("dequantized_specialized_wgmma", "int8", 0, "k_packed", FLOAT16, (4100, 333), (9, 0)),
            ("dequantized_pipelined_mma", "fp8_e4m3", 32, "prepacked", BFLOAT16, (300, 4096), (8, 0))]:
        fmt = WeightFormat(kind, group, False, "bf16_bits" if et is BFLOAT16 else "f16_bits", layout, transposed=True)
        d = dialect_for(nominal_cuda_device(*cc))
        alg = REGISTRY[name]()
        problem = MatmulProblem(1, 512, n, k, et, et, et, lhs_align=8, weights=fmt)
        out[f"t-{name}-{kind}-sm{cc[0]}{cc[1]}"] = alg.render(alg.setup(problem, d), d)
    return out


def _jobs():
    return jobs_by_suffix(cuda_sources())


@prefetched(_jobs)
def test_cuda_sources_compile_without_spills():
    assert_no_spills(_jobs())
