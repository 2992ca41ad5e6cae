"""Operand scales: every kind from every array kind (PyOpenCL block scales, bfloat16 values, one
element of any shape per tensor), checked against the documented formula (a * sa) @ (b * sb)."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.epilogue.scales import BLOCK, check_scale
from helpers import BF16, rel_error


def _expanded(s, kind, m, n, k, lhs):
    s = np.asarray(s, np.float64)
    if kind == "tensor":
        return np.full((m, k) if lhs else (k, n), s.reshape(()))
    if kind == "block":
        if lhs:
            return np.repeat(s, BLOCK, 1)[:, :k]
        return np.repeat(np.repeat(s, BLOCK, 0), BLOCK, 1)[:k, :n]
    return np.repeat(s.reshape(-1, 1), k, 1) if lhs else np.repeat(s.reshape(1, -1), k, 0)


CASES = [  # (m, n, k, scale_a shape, scale_b shape, kinds)
    (67, 45, 300, (67, 3), (3, 1), ("block", "block")),
    (5, 129, 300, (1, 1), (129,), ("tensor", "col")),      # (1, 1) per tensor with K > 128
    (6, 7, 40, (6,), (1, 7), ("row", "col")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[5][0]}-{c[5][1]}")
@pytest.mark.parametrize("kind", ["numpy", "pyopencl"])
@pytest.mark.parametrize("scale_dtype", ["float32", "bfloat16"])
def test_scales_of_every_kind_and_library(opencl_engine, rng, case, kind, scale_dtype):
    if scale_dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    m, n, k, sa_shape, sb_shape, kinds = case
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    dt = BF16 if scale_dtype == "bfloat16" else np.float32
    sa, sb = (rng.random(shape).astype(np.float32) + 0.5 for shape in (sa_shape, sb_shape))
    sa, sb = sa.astype(dt), sb.astype(dt)
    want = (a * _expanded(sa, kinds[0], m, n, k, True)) @ (b * _expanded(sb, kinds[1], m, n, k, False))
    if kind == "pyopencl":
        cla = pytest.importorskip("pyopencl.array")
        q = opencl_engine.runtime.queue
        to = (lambda x: cla.to_device(q, x.view(np.uint16)).view(BF16) if x.dtype == BF16 else cla.to_device(q, x))
        got = opencl_engine.matmul(cla.to_device(q, a), cla.to_device(q, b), scale_a=to(sa), scale_b=to(sb)).get()
    else:
        got = opencl_engine.matmul(a, b, scale_a=sa, scale_b=sb)
    assert rel_error(got, want) < 2e-5


def test_one_element_of_any_shape_is_per_tensor():
    for shape in [(), (1,), (1, 1)]:
        value = np.ones(shape, np.float32)
        assert check_scale(value, "scale_a", 5, 6, 1000, True).kind == "tensor"
    with pytest.raises(ValueError, match=r"scale_b has shape \(2, 2\)"):
        check_scale(np.ones((2, 2), np.float32), "scale_b", 5, 6, 1000, False)
    with pytest.raises(TypeError, match="scale_a must hold floating-point values"):
        check_scale(np.ones(5, np.int32), "scale_a", 5, 6, 10, True)


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [(67, 45, 300), (5, 300, 129), (256, 256, 4096)])
def test_fp8_block_scales_are_as_accurate_as_row_scales_on_the_same_kernel(rng, shape):
    # The loss is the tensor cores' fp8 accumulation inside each 128 of K (promoted to float32 per
    # block: cuBLASLt's own error is alike), the same for every scale kind; exact float32 FMA on the
    # dequantized values is far below it. H100, 2026-11-26: 1.19e-4 to 1.36e-4 for tensor, row and
    # block scales alike on specialized_wgmma and pipelined_wgmma; simple_unit 4e-8 to 1e-6.
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from conftest import get_engine
    engine = get_engine("cuda")
    if engine.runtime.device.compute_capability != (9, 0):
        pytest.skip("fp8 wgmma needs an sm_90 GPU")
    m, n, k = shape
    a = (rng.standard_normal((m, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((k, n)) * 3).astype(ml_dtypes.float8_e4m3fn)
    errors = {}
    for kind, sa_shape, sb_shape in (("row", (m,), (n,)), ("block", (m, -(-k // 128)), (-(-k // 128), -(-n // 128)))):
        sa, sb = (rng.random(s).astype(np.float32) + 0.5 for s in (sa_shape, sb_shape))
        want = (a.astype(np.float64) * _expanded(sa, kind, m, n, k, True)) @ (
            b.astype(np.float64) * _expanded(sb, "col" if kind == "row" else kind, m, n, k, False))
        for alg in ("specialized_wgmma", "simple_unit"):
            got = engine.matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=np.float32, algorithm=alg)
            errors[kind, alg] = rel_error(got, want)
    assert errors["row", "simple_unit"] < 1e-6 and errors["block", "simple_unit"] < 2e-6
    assert errors["block", "specialized_wgmma"] < 2.5e-4
    assert errors["block", "specialized_wgmma"] < 1.5 * errors["row", "specialized_wgmma"]
