"""Shared pieces of the Hopper (sm_90) tests: nominal problems and setups, the GPU fixture, device
operands with padded strides, fp8 operands with their scales."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import get_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))
E4M3 = BY_NAME["float8_e4m3fn"]


def problem(b=1, m=256, n=512, k=192, dtype="float16", layouts=("row", "row"), align=8):
    et = BY_NAME[dtype]
    return MatmulProblem(b, m, n, k, et, et, et, Layout(layouts[0]), Layout(layouts[1]), align, align)


def setup(p, dialect=SM90, **overrides):
    alg = SpecializedWgmmaAlgorithm(**overrides)
    cfg = alg.setup(p, dialect)
    return alg, cfg


def sm90_engine():
    """The CUDA engine, or a skip where the GPU is not sm_90 (wgmma and TMA)."""
    engine = get_engine("cuda")
    if engine.runtime.device.compute_capability != (9, 0):
        pytest.skip(f"wgmma and TMA need an sm_90 GPU, not {engine.runtime.device.name}")
    return engine


def padded(engine, host, layout, pad):
    """``host`` on the device in ``layout``, its leading dimension rounded up to 8 elements past
    ``pad`` (the extents stay odd; the stride is what TMA needs 16-byte aligned)."""
    t = host if layout == "row" else np.swapaxes(host, -1, -2)
    ld = -(-(t.shape[-1] + pad) // 8) * 8
    buf = np.zeros(t.shape[:-1] + (ld,), t.dtype)
    buf[..., :t.shape[-1]] = t
    dev = engine.runtime.to_device(buf)[..., :t.shape[-1]]
    return dev if layout == "row" else dev.swapaxes(-1, -2)


def fp8_problem(m=512, n=512, k=1024, scales=None, b=1):
    ep = Epilogue(lhs_scale=scales, rhs_scale=scales) if scales else Epilogue()
    return MatmulProblem(b, m, n, k, E4M3, E4M3, BY_NAME["bfloat16"], Layout.ROW, Layout.COL, 16, 16, epilogue=ep)


def scales(rng, kind, b, m, n, k):
    """(scale_a, scale_b, a's factors (m, k), b's (k, n))."""
    if kind is None:
        return None, None, 1.0, 1.0
    if kind == "row":
        sa, sb = np.float32(rng.random(m) + 0.5), np.float32(rng.random(n) + 0.5)
        return sa, sb, np.repeat(sa[:, None], k, 1), np.repeat(sb[None, :], k, 0)
    kb, nb = -(-k // 128), -(-n // 128)
    sa, sb = np.float32(rng.random((m, kb)) + 0.5), np.float32(rng.random((kb, nb)) + 0.5)
    return sa, sb, np.repeat(sa, 128, 1)[:, :k], np.repeat(np.repeat(sb, 128, 0), 128, 1)[:k, :n]


def fp8_operands(rng, b, m, n, k, kind):
    """(a, b, scale_a, scale_b, float64 reference of the dequantized product): e4m3 host arrays
    (CuPy holds no fp8: the engine copies them over), b column-major (K-major for wgmma) as fp8
    weights are kept."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    lead = (b,) if b > 1 else ()
    a = (rng.standard_normal(lead + (m, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    bb = np.swapaxes((rng.standard_normal(lead + (n, k)) * 3).astype(ml_dtypes.float8_e4m3fn), -1, -2)
    sa, sb, fa, fb = scales(rng, kind, b, m, n, k)
    return a, bb, sa, sb, (a.astype(np.float64) * fa) @ (bb.astype(np.float64) * fb)
