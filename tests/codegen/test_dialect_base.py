"""codegen/dialect_base.py: the shared vocabulary -- backend check, literals and zeros, a preamble
holding only the helpers its element types need, load/store expressions, on-demand helpers -- and
the shared bf16 / fp8 conversions run on PoCL against ml_dtypes, bit for bit."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect_base import Dialect
from gemm_engine.codegen.opencl_dialect import OpenCLDialect
from gemm_engine.codegen.cuda_dialect import CudaDialect
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, FLOAT8_E4M3, FLOAT8_E5M2, INT8, ml_dtype
from helpers import cl_run

CL_DEVICE = DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32)


def test_a_dialect_refuses_another_backends_device():
    with pytest.raises(ValueError, match="OpenCLDialect needs a opencl device, got cuda"):
        OpenCLDialect(nominal_cuda_device())
    with pytest.raises(ValueError, match="CudaDialect"):
        CudaDialect(CL_DEVICE)


def test_key_tells_backends_and_architectures_apart():
    assert CudaDialect(nominal_cuda_device(9, 0)).key != CudaDialect(nominal_cuda_device(8, 0)).key
    # OpenCL: the vendor, ISA and the probe's features too (NVIDIA's driver with and without mma.sync
    # renders different kernels).
    assert OpenCLDialect(CL_DEVICE).key == ("opencl", "", "", None, ())
    assert OpenCLDialect(replace(CL_DEVICE, features=frozenset({"mma_sync"}))).key != OpenCLDialect(CL_DEVICE).key


def test_literals_and_zeros():
    assert Dialect.literal(1.5, "f32") == "1.5f" and Dialect.literal(2, "f64") == "2.0"
    assert float(Dialect.literal(0.1, "f64")) == 0.1       # repr: round-trips exactly
    d = OpenCLDialect(CL_DEVICE)
    assert d.zero(FLOAT32) == "0.0f" and d.zero(FLOAT64) == "0.0" and d.zero(INT8) == "0" and d.zero("i32") == "0"


def test_fp64_capability_follows_the_device():
    assert OpenCLDialect(CL_DEVICE).supports("fp64")
    no64 = DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32, fp64=False)
    assert not OpenCLDialect(no64).supports("fp64")
    assert not OpenCLDialect(CL_DEVICE).supports("no such feature")


@pytest.mark.parametrize("dialect", [OpenCLDialect(CL_DEVICE), CudaDialect(nominal_cuda_device())])
def test_preamble_holds_only_the_helpers_its_types_need(dialect):
    plain = dialect.preamble([FLOAT32])
    assert "bf16_to_f32" not in plain and "f8e4m3_to_f32" not in plain and "#define KERNEL" in plain
    bf = dialect.preamble([BFLOAT16])
    assert "bf16_to_f32" in bf and "f32_to_bf16" in bf and "f8e5m2_to_f32" not in bf
    fp8 = dialect.preamble([FLOAT8_E4M3, FLOAT8_E5M2])
    assert "f8e4m3_to_f32" in fp8 and "f8e5m2_to_f32" in fp8
    assert dialect.preamble([FLOAT32], headers=("<mma.h>",)).startswith("#include <mma.h>\n")


def test_load_and_store_expressions_convert_per_storage():
    d = OpenCLDialect(CL_DEVICE)
    assert d.load_global(FLOAT32, "p", "i") == "p[i]"
    assert d.load_global(BFLOAT16, "p", "i") == "bf16_to_f32(p[i])"
    assert d.load_global(FLOAT8_E5M2, "p", "i") == "f8e5m2_to_f32(p[i])"
    assert d.store_global(BFLOAT16, "p", "i", "v") == "p[i] = f32_to_bf16(v);"
    assert d.store_global(FLOAT64, "p", "i", "v") == "p[i] = v;"
    # half as 16 raw bits on both backends, converted by the preamble's helper (copied raw by tensor cores)
    assert d.load_global(FLOAT16, "p", "i") == "f16_to_f32(p[i])"
    assert d.store_global(FLOAT16, "p", "i", "v") == "p[i] = f32_to_f16(v);"


def test_vector_types_and_refs():
    d = OpenCLDialect(CL_DEVICE)
    assert d.vector_type("f32", 4) == "float4" and d.vector_type("u32", 4) == "uint4"
    assert d.vector_ref("local", "f32", 4, "s + 4", const=True) == "(*(const __local float4*)(s + 4))"
    c = CudaDialect(nominal_cuda_device())
    assert c.vector_ref("local", "f64", 2, "s") == "(*(double2*)(s))"
    assert c.vector_ref("global", "f32", 4, "p") == "(*(GLOBAL float4*)(p))"


def test_helpers_for_defines_only_what_the_body_calls():
    d = OpenCLDialect(CL_DEVICE)
    assert d.helpers_for("x = 1;") == ""
    body = "w = ge_pack_bf16x2(a, b);"
    out = d.helpers_for(body)
    assert "ge_pack_bf16x2(float hi" in out and "ge_mma16816" not in out and "ge_pack_f16x2" not in out
    assert d.helpers_for("not_ge_pack_bf16x2(a, b)") == ""      # a whole word only


def test_base_dialect_refuses_what_it_lacks_by_class_name():
    d = OpenCLDialect(CL_DEVICE)
    with pytest.raises(NotImplementedError, match="Dialect"):
        Dialect.plane_mma(d, "f16", "c", "a", "b", "s")


# -- the conversions, on PoCL ----------------------------------------------------------------------
def _convert_kernel(d, fn: str, in_type: str, out_type: str, types) -> str:
    return d.preamble(types) + (f"__kernel void conv(__global const {in_type}* x, __global {out_type}* y) "
                                f"{{ const size_t i = get_global_id(0); y[i] = {fn}(x[i]); }}\n")


@pytest.mark.parametrize("name, et", [("float8_e4m3fn", FLOAT8_E4M3), ("float8_e5m2", FLOAT8_E5M2)])
def test_fp8_to_f32_is_exact_for_every_code(opencl_engine, name, et):
    dt = ml_dtype(name)
    if dt is None:
        pytest.skip("ml_dtypes is not installed")
    d = OpenCLDialect(opencl_engine.device)
    codes = np.arange(256, dtype=np.uint8)
    got = cl_run(opencl_engine, _convert_kernel(d, f"{et.storage}_to_f32", "uchar", "float", [et]), "conv",
                 [codes, np.zeros(256, np.float32)], 256)
    want = codes.view(dt).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))   # signed zeros too


def test_bf16_round_trip_matches_ml_dtypes(opencl_engine, rng):
    bf16 = ml_dtype("bfloat16")
    if bf16 is None:
        pytest.skip("ml_dtypes is not installed")
    d = OpenCLDialect(opencl_engine.device)
    # Random bit patterns (every exponent), exact ties, and the specials.
    bits = rng.integers(0, 1 << 32, size=4096, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 1 << 16, size=512, dtype=np.uint32) << 16) | 0x8000
    specials = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x00000001], np.uint32)
    x = np.concatenate([bits, ties, specials]).view(np.float32)
    x = x[~np.isnan(x)]
    got = cl_run(opencl_engine, _convert_kernel(d, "f32_to_bf16", "float", "ushort", [BFLOAT16]), "conv",
                 [x, np.zeros(x.size, np.uint16)], x.size)
    np.testing.assert_array_equal(got, x.astype(bf16).view(np.uint16))
    back = cl_run(opencl_engine, _convert_kernel(d, "bf16_to_f32", "ushort", "float", [BFLOAT16]), "conv",
                  [got, np.zeros(x.size, np.float32)], x.size)
    np.testing.assert_array_equal(back, got.view(bf16).astype(np.float32))


def test_bf16_of_nan_stays_nan(opencl_engine):
    d = OpenCLDialect(opencl_engine.device)
    x = np.array([0x7f800001, 0xffc00000, 0x7fffffff], np.uint32).view(np.float32)
    got = cl_run(opencl_engine, _convert_kernel(d, "f32_to_bf16", "float", "ushort", [BFLOAT16]), "conv",
                 [x, np.zeros(3, np.uint16)], 3)
    assert np.all((got & 0x7f80) == 0x7f80) and np.all((got & 0x7f) != 0)
