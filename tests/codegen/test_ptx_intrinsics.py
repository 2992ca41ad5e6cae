"""codegen/ptx_intrinsics.py (render only): one method renders each PTX statement for both dialects that
mix it in (CUDA C++ and NVIDIA's OpenCL); the hooks make the difference: references vs pointers for
ldmatrix, ``asm`` vs ``__asm__``, ``__global`` on a copy's source; each call records its helper."""
from __future__ import annotations

import pytest

from gemm_engine.codegen import ptx
from gemm_engine.codegen.cuda_dialect import CudaDialect
from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.ptx_intrinsics import PtxIntrinsics


def dialects():
    return [dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_opencl_device("sm_80"))]


def test_both_dialects_mix_it_in():
    cuda, ocl = dialects()
    assert isinstance(cuda, CudaDialect) and isinstance(cuda, PtxIntrinsics) and isinstance(ocl, PtxIntrinsics)
    assert type(ocl) is not type(cuda)


def test_ldmatrix_by_reference_on_cuda_by_pointer_on_opencl():
    cuda, ocl = dialects()
    name = ptx.ldmatrix(2, False, False)[0]
    assert cuda.ldmatrix(["r0", "r1"], "addr", False) == f"{name}(r0, r1, addr);"
    s = ocl.ldmatrix(["r0", "r1"], "addr", False)
    assert s == f"{ptx.ldmatrix(2, False, True)[0]}(&r0, &r1, addr);"
    helper = ocl.helpers_for(s)
    assert "__asm__ volatile" in helper and "unsigned* r0" in helper
    cuda_helper = cuda.helpers_for(cuda.ldmatrix(["r0", "r1"], "addr", False))
    assert "asm volatile" in cuda_helper and "__asm__" not in cuda_helper and "unsigned& r0" in cuda_helper


@pytest.mark.parametrize("d", dialects(), ids=lambda d: type(d).__name__)
def test_statements_and_expressions(d):
    assert d.cvt_tf32("x") == f"{ptx.cvt_tf32()[0]}(x)"
    assert d.pack_half2("bf16x2", "hi", "lo") == f"{ptx.cvt_pack('bf16x2')[0]}(hi, lo)"
    assert d.dmma((8, 8, 4), "c", "a", "b") == f"{ptx.dmma(8, 8, 4)[0]}(c, a, b);"
    assert d.cp_async_commit() == f"{ptx.cp_async_commit()[0]}();"
    assert d.cp_async_wait(2) == f"{ptx.cp_async_wait(2)[0]}();"
    assert d.cp_async_wait_all() == f"{ptx.cp_async_wait_all()[0]}();"
    assert d.st_shared_v4("p", ["a", "b", "c", "d"]) == f"{ptx.st_shared_v4()[0]}(p, a, b, c, d);"
    mma = d.mma_sync((16, 8, 16), "f16", "f32", "f32", "acc", "a", "b", 4, 2)
    assert mma.endswith("(acc, a, b);") and "m16n8k16" in mma


@pytest.mark.parametrize("d", dialects(), ids=lambda d: type(d).__name__)
def test_cp_async_zero_fill_tail_only_when_source_bytes_given(d):
    assert d.cp_async("cg", 16, "dst", "src") == f"{ptx.cp_async('cg', 16, False, d._global_space)[0]}(dst, src);"
    filled = d.cp_async("cg", 16, "dst", "src", "n")
    assert filled.endswith("(dst, src, n);") and "zfill" in filled


def test_opencl_copy_source_is_global():
    cuda, ocl = dialects()
    ocl_def = ocl.helpers_for(ocl.cp_async("ca", 8, "dst", "src"))
    cuda_def = cuda.helpers_for(cuda.cp_async("ca", 8, "dst", "src"))
    assert "__global" in ocl_def and "__global" not in cuda_def


def test_mma_sync_integer_accumulator_constraint():
    d = dialects()[0]
    s = d.mma_sync((16, 8, 32), "s8", "s32", "i32", "acc", "a", "b", 4, 2)
    assert '"+r"' in d.helpers_for(s)
    with pytest.raises(KeyError):
        d.mma_sync((16, 8, 16), "f16", "f32", "f16", "acc", "a", "b", 4, 2)
