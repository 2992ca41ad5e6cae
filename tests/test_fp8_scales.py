"""fp8 operands and operand scales (gemm_engine/scales.py), on every backend here.

References are float64 products of the dequantized operands (the fp8 values are exact in float64);
outputs are poisoned first so unwritten elements fail. Tolerances: float32 results 1e-5 relative
(Frobenius) on the portable path, whose products and sums are float32 FMA; 2e-3 where the
H100's fp8 wgmma accumulates (its accumulator keeps fewer than float32's bits: measured 1.3e-3 at
K = 4096, bench/results/h100/low_precision.md, notes); bfloat16 results 1e-2.
"""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine.dtypes import FP8_NAMES, ml_dtype
from gemm_engine.epilogue.scales import BLOCK

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3, E5M2 = ml_dtype("float8_e4m3fn"), ml_dtype("float8_e5m2")

#: (batch, m, n, k): 1s, primes, K not a multiple of 128, tile edges.
SHAPES = [(1, 1, 1, 1), (1, 5, 7, 3), (1, 37, 29, 300), (2, 17, 33, 129), (1, 64, 128, 256), (3, 13, 1, 250)]


def fp8(rng, shape, dtype, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def rel(out, ref) -> float:
    out = np.asarray(out, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def tolerance(engine, out_dtype=np.float32) -> float:
    if np.dtype(out_dtype).name == "bfloat16":
        return 1e-2
    return 2e-3 if engine.backend == "cuda" else 1e-5


def scale_arrays(rng, kind, m, n, k):
    """(scale_a, scale_b, expanded a scale (m, k), expanded b scale (k, n)) of a kind."""
    kb, nb = -(-k // BLOCK), -(-n // BLOCK)
    if kind == "number":
        return 0.5, 3.0, np.full((m, k), 0.5), np.full((k, n), 3.0)
    if kind == "tensor":
        sa, sb = np.float32([1.5]), np.array(0.25, np.float32)
        return sa, sb, np.full((m, k), 1.5), np.full((k, n), 0.25)
    if kind == "row":
        sa, sb = np.float32(rng.random(m) + 0.5), np.float32(rng.random((1, n)) + 0.5)
        return sa, sb, np.repeat(sa[:, None], k, 1), np.repeat(sb, k, 0)
    sa, sb = np.float32(rng.random((m, kb)) + 0.5), np.float32(rng.random((kb, nb)) + 0.5)
    full_b = np.repeat(np.repeat(sb, BLOCK, 0), BLOCK, 1)[:k, :n]
    return sa, sb, np.repeat(sa, BLOCK, 1)[:, :k], full_b


@pytest.mark.parametrize("kinds", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"),
                                   ("float8_e4m3fn", "float8_e5m2")])
@pytest.mark.parametrize("shape", SHAPES)
def test_fp8_product_is_float32(engine, rng, kinds, shape):
    b_, m, n, k = shape
    a = fp8(rng, (b_, m, k), ml_dtype(kinds[0]))
    b = fp8(rng, (b_, k, n), ml_dtype(kinds[1]))
    out = np.full((b_, m, n), np.nan, np.float32)
    result = engine.matmul(a, b, out=out)
    assert result is out and out.dtype == np.float32
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert rel(out, ref) < tolerance(engine), rel(out, ref)


@pytest.mark.parametrize("dtype", FP8_NAMES)
def test_every_fp8_value_decodes_exactly(opencl_engine, dtype):
    """All 256 bit patterns (subnormals, the largest finite values, infinities and NaN of e5m2,
    NaN of e4m3fn) times one: the bit decoding in both dialects is exact."""
    x = np.arange(256, dtype=np.uint8).view(ml_dtype(dtype)).reshape(256, 1)
    out = opencl_engine.matmul(x, np.ones((1, 1), ml_dtype(dtype)), algorithm="simple_unit")[:, 0]
    ref = x.astype(np.float32)[:, 0]
    assert np.array_equal(out, ref, equal_nan=True)


@pytest.mark.parametrize("kind", ["number", "tensor", "row", "block"])
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col")])
def test_scaled_fp8(engine, rng, kind, layouts):
    m, n, k = 37, 29, 300
    a, b = fp8(rng, (m, k), E4M3), fp8(rng, (k, n), E4M3)
    if layouts[0] == "col":
        a = np.asfortranarray(a)
    if layouts[1] == "col":
        b = np.asfortranarray(b)
    sa, sb, fa, fb = scale_arrays(rng, kind, m, n, k)
    ref = (a.astype(np.float64) * fa) @ (b.astype(np.float64) * fb)
    out = engine.matmul(a, b, scale_a=sa, scale_b=sb)
    assert out.dtype == np.float32 and rel(out, ref) < tolerance(engine), rel(out, ref)


def test_scales_then_epilogue(engine, rng):
    """The scales dequantize first; alpha, beta * c, bias and the activation apply after."""
    m, n, k = 33, 40, 70
    a, b = fp8(rng, (m, k), E4M3), fp8(rng, (k, n), E5M2)
    sa, sb = np.float32(rng.random((m, 1)) + 0.5), np.float32(rng.random(n) + 0.5)
    c = rng.standard_normal((m, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    bf16 = ml_dtype("bfloat16")
    out = engine.matmul(a, b, scale_a=sa, scale_b=sb, alpha=0.5, c=c, beta=2.0, bias=bias,
                        activation="relu", out_dtype=bf16)
    prod = (a.astype(np.float64) * sa) @ (b.astype(np.float64) * sb)
    ref = np.maximum(0.5 * prod + 2.0 * c + bias, 0)
    assert out.dtype == bf16 and rel(out.astype(np.float64), ref) < tolerance(engine, bf16)


def test_int8_with_scales_is_float32(engine, rng):
    """W8A8: int8 operands with row / column scales give float32 (the products exact in int32)."""
    m, n, k = 20, 24, 100
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    sa, sb = np.float32(rng.random(m) + 0.5), np.float32(rng.random(n) + 0.5)
    out = engine.matmul(a, b, scale_a=sa, scale_b=sb)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * sa[:, None] * sb[None, :]
    assert out.dtype == np.float32 and rel(out, ref) < 1e-6


def test_repeated_scaled_calls_read_each_calls_scales(opencl_engine, rng):
    """Repeated calls on device arrays take the fast path: new scale values (and new scale
    arrays) are read on every call, not the first call's."""
    cla = pytest.importorskip("pyopencl.array")
    q = opencl_engine.runtime.queue
    m, n, k = 16, 12, 40
    a = cla.to_device(q, rng.integers(-128, 128, (m, k)).astype(np.int8))
    b = cla.to_device(q, rng.integers(-128, 128, (k, n)).astype(np.int8))
    exact = a.get().astype(np.float64) @ b.get().astype(np.float64)
    for i in range(3):
        sa_h, sb_h = np.float32(rng.random(m) + i), np.float32(rng.random(n) + 1)
        sa, sb = cla.to_device(q, sa_h), cla.to_device(q, sb_h)
        out = opencl_engine.matmul(a, b, scale_a=sa, scale_b=sb, alpha=2.0).get()
        assert rel(out, 2.0 * exact * sa_h[:, None] * sb_h[None, :]) < 1e-6, i


@pytest.mark.parametrize("label, kwargs, message", [
    ("scale_a", dict(scale_a=np.ones(5, np.float32)), "scale_a has shape (5,)"),
    ("scale_b", dict(scale_b=np.ones((3, 3), np.float32)), "scale_b has shape (3, 3)"),
    ("scale_a", dict(scale_a=np.ones(8, np.int32)), "scale_a must hold floating-point values"),
    ("scale_b", dict(scale_b="2"), "scale_b must"),
])
def test_bad_scales_are_refused_before_launch(opencl_engine, label, kwargs, message):
    a, b = np.ones((8, 9), E4M3), np.ones((9, 10), E4M3)
    out = np.full((8, 10), np.nan, np.float32)
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(").replace(")", r"\)")):
        opencl_engine.matmul(a, b, out=out, **kwargs)
    assert np.isnan(out).all()      # nothing half-written


def test_fp8_mixes_only_with_fp8(opencl_engine):
    with pytest.raises(TypeError, match="fp8 operand multiplies only with an fp8 operand"):
        opencl_engine.matmul(np.ones((2, 2), E4M3), np.ones((2, 2), np.float16))


def test_torch_fp8_tensors(engine, rng):
    """torch float8 tensors (as their bits through DLPack), scales as tensors, a torch result."""
    torch = pytest.importorskip("torch")
    if engine.backend == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    dev = "cuda" if engine.backend == "cuda" else "cpu"
    a = torch.from_numpy(rng.standard_normal((24, 48)).astype(np.float32)).to(dev).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.standard_normal((48, 16)).astype(np.float32)).to(dev).to(torch.float8_e4m3fn)
    sa, sb = torch.rand(24, 1, device=dev) + 0.5, torch.rand(1, 16, device=dev) + 0.5
    for _ in range(2):          # the second call takes the torch fast path
        out = engine.matmul(a, b, scale_a=sa, scale_b=sb)
        ref = (a.double() * sa.double()) @ (b.double() * sb.double())
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
        assert rel(out.cpu().numpy(), ref.cpu().numpy()) < tolerance(engine)


def test_fp8_results_are_refused(opencl_engine):
    a = np.ones((4, 4), E4M3)
    with pytest.raises(TypeError, match="fp8 is an operand type only"):
        opencl_engine.matmul(a, a, out_dtype=E4M3)
    with pytest.raises(TypeError, match="fp8 is an operand type only"):
        opencl_engine.matmul(a, a, out=np.zeros((4, 4), E5M2), casting="unsafe")


def test_block_scales_take_the_kernel_that_applies_them_or_run_dequantized():
    """On the H100 (nominal), auto takes specialized_wgmma for block-scaled fp8 (it and
    pipelined_wgmma apply the scales per K block); an algorithm whose global level does not is
    refused before launch with the reason (matmul then dequantizes first)."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.dtypes import FLOAT8_E4M3, FLOAT32
    from gemm_engine.errors import SetupError
    from gemm_engine.epilogue.spec import Epilogue
    from gemm_engine.problem import Layout, MatmulProblem
    d = dialect_for(nominal_cuda_device(9, 0))
    p = MatmulProblem(1, 256, 384, 1024, FLOAT8_E4M3, FLOAT8_E4M3, FLOAT32, Layout.ROW, Layout.COL, 16, 16,
                      epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    auto = REGISTRY["auto"]()
    assert auto.chosen(auto.setup(p, d)).name == "specialized_wgmma"
    assert REGISTRY["pipelined_wgmma"]().setup(p, d).batch.global_.promotion.lhs_block
    for name in ("simple_unit", "pipelined_mma", "skinny"):
        with pytest.raises(SetupError, match="per block of 128 along K"):
            REGISTRY[name]().setup(p, d)


def test_split_k_refuses_block_scales():
    """A batch level that splits K hands its global level K ranges and no epilogue: block scales
    would be indexed wrong there, so the composition is refused (matmul then dequantizes)."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.dtypes import FLOAT8_E4M3, FLOAT32
    from gemm_engine.errors import SetupError
    from gemm_engine.epilogue.spec import Epilogue
    from gemm_engine.problem import Layout, MatmulProblem
    d = dialect_for(nominal_cuda_device(9, 0))
    p = MatmulProblem(2, 128, 256, 4160, FLOAT8_E4M3, FLOAT8_E4M3, FLOAT32, Layout.ROW, Layout.COL, 16, 16,
                      epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    for name in ("split_k", "auto"):
        try:
            cfg = REGISTRY[name]().setup(p, d)
        except SetupError as exc:
            assert name == "split_k" and "splits K" in str(exc), exc
            continue
        assert not type(REGISTRY[name]().chosen(cfg).build()).__name__.startswith("SplitK")
