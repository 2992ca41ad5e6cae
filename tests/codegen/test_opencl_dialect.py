"""codegen/opencl_dialect.py: OpenCL words, and its emulated helpers run on PoCL: the plane's
m16n8k16 product (mma.sync's register layout) against a float64 product, the 16-bit pair packing
against numpy / ml_dtypes rounding."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.opencl_dialect import OpenCLDialect
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, ml_dtype
from helpers import cl_run

D = OpenCLDialect(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))


def test_words():
    assert D.c_type("i8") == "char" and D.c_type("f16_bits") == "ushort" and D.c_type("u32") == "uint"
    assert "typedef long i64;" in D.preamble([FLOAT32]) and "#define INLINE static inline" in D.preamble([FLOAT32])
    assert "cl_khr_fp64" in D.preamble([FLOAT64]) and "cl_khr_fp64" not in D.preamble([FLOAT32])
    assert D.store_global(FLOAT16, "p", "i", "v") == "p[i] = f32_to_f16(v);"   # half as ushort bits
    assert D.math("exp", "f32") == "exp"                # one overloaded name
    assert D.ticket("q") == "atomic_inc((volatile __global uint*)(q))"
    assert D.supports("plane_mma") and not D.plane_mma_native
    assert D.plane_mma_scratch() == 16 * 16 + 16 * 8
    assert "CL1.2" in D.compile_note("")


def _halves(x: np.ndarray, kind: str) -> np.ndarray:
    """16-bit patterns of ``x`` in ``kind``."""
    return x.astype(np.float16 if kind == "f16" else ml_dtype("bfloat16")).view(np.uint16).astype(np.uint32)


def _word(lo, hi):
    return lo | (hi << 16)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_plane_mma_emulation_matches_a_float64_product(opencl_engine, rng, kind):
    if kind == "bf16" and ml_dtype("bfloat16") is None:
        pytest.skip("ml_dtypes is not installed")
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    ha, hb = _halves(a, kind), _halves(b, kind)
    # mma.sync m16n8k16 fragments (PTX ISA): lane = 4 g + t.
    afrag = np.zeros((32, 4), np.uint32)
    bfrag = np.zeros((32, 2), np.uint32)
    c0 = rng.standard_normal((16, 8)).astype(np.float32)
    cfrag = np.zeros((32, 4), np.float32)
    where = np.zeros((32, 4, 2), int)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for r in range(4):
            row, col = g + 8 * (r & 1), 2 * t + 8 * (r >> 1)
            afrag[lane, r] = _word(ha[row, col], ha[row, col + 1])
        for r in range(2):
            k = 2 * t + 8 * r
            bfrag[lane, r] = _word(hb[k, g], hb[k + 1, g])
        for e in range(4):
            where[lane, e] = (g + 8 * (e >> 1), 2 * t + (e & 1))
            cfrag[lane, e] = c0[tuple(where[lane, e])]
    body = ("__kernel void k(__global const uint* A, __global const uint* B, __global float* C) {\n"
            "    __local float s[384];\n    const int lane = UNIT_ID;\n"
            "    uint a[4], b[2]; float c[4];\n"
            "    for (int r = 0; r < 4; ++r) { a[r] = A[lane * 4 + r]; c[r] = C[lane * 4 + r]; }\n"
            "    for (int r = 0; r < 2; ++r) b[r] = B[lane * 2 + r];\n"
            f"    {D.plane_mma(kind, 'c', 'a', 'b', 's')}\n"
            "    for (int r = 0; r < 4; ++r) C[lane * 4 + r] = c[r];\n}\n")
    source = D.preamble([BFLOAT16]) + D.helpers_for(body) + body
    got = cl_run(opencl_engine, source, "k", [afrag, bfrag, cfrag], 32, local=32)
    dt = np.float16 if kind == "f16" else ml_dtype("bfloat16")
    ref = c0.astype(np.float64) + a.astype(dt).astype(np.float64) @ b.astype(dt).astype(np.float64)
    out = np.zeros((16, 8))
    for lane in range(32):
        for e in range(4):
            out[tuple(where[lane, e])] = got[lane, e]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_pack16x2_rounds_to_nearest_even_hi_in_the_upper_half(opencl_engine, rng, kind):
    if kind == "bf16" and ml_dtype("bfloat16") is None:
        pytest.skip("ml_dtypes is not installed")
    hi = (rng.standard_normal(1000) * 100).astype(np.float32)
    lo = (rng.standard_normal(1000) * 1e-3).astype(np.float32)
    body = ("__kernel void k(__global const float* H, __global const float* L, __global uint* W) {\n"
            f"    const size_t i = get_global_id(0); W[i] = {D.pack16x2(kind, 'H[i]', 'L[i]')};\n}}\n")
    source = D.preamble([BFLOAT16]) + D.helpers_for(body) + body
    got = cl_run(opencl_engine, source, "k", [hi, lo, np.zeros(1000, np.uint32)], 1000)
    np.testing.assert_array_equal(got, _word(_halves(lo, kind), _halves(hi, kind)))
