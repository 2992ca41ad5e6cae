"""codegen/cuda_dialect.py: CUDA words and capabilities by compute capability, the target arch a
source needs, the intrinsic calls it renders (defined only where called), and a kernel written
with its intrinsic methods through nvcc/ptxas for sm_90a (calls agree with the definitions)."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.cuda_dialect import CudaDialect, cuda_target_arch, source_needs_sm90
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32

from cuda_compile import SM90A, compile_cuda, nvcc_or_skip

SM90, SM80 = nominal_cuda_device(9, 0), nominal_cuda_device(8, 0)


def test_capabilities_by_compute_capability():
    h, a = CudaDialect(SM90), CudaDialect(SM80)
    for feature in ("mma_sync", "cp_async", "ldmatrix", "bf16_mma", "dequant_pair", "plane_mma"):
        assert h.supports(feature) and a.supports(feature)
        assert not CudaDialect(nominal_cuda_device(7, 5)).supports(feature)
    assert h.supports("wgmma") and not a.supports("wgmma")
    assert h.supports("fp64") and not h.supports("nothing")
    assert h.plane_mma_native


def test_words():
    d = CudaDialect(SM90)
    assert d.math("exp", "f32") == "expf" and d.math("exp", "f64") == "exp"
    assert d.c_type("f16_bits") == "unsigned short" and d.c_type("i8") == "signed char"
    assert "extern \"C\" __global__" in d.preamble([FLOAT32])
    assert "f16_to_f32" in d.preamble([FLOAT16]) and "f16_to_f32" not in d.preamble([FLOAT32])
    assert d.shared_address("p") == "((unsigned)__cvta_generic_to_shared(p))"
    assert d.dynamic_shared("smem") == "extern __shared__ __align__(16) unsigned char smem[];"
    assert d.cluster_dims(2) == "__cluster_dims__(2, 1, 1)"


def test_pair_magic_constants_are_the_bias_in_both_halves():
    for kind, (bits, bias) in CudaDialect.PAIR_MAGIC.items():
        assert bits >> 16 == bits & 0xffff
        half = np.array([bits & 0xffff], np.uint16)
        value = half.view(np.float16)[0] if kind == "f16" else np.array([int(half[0]) << 16], np.uint32).view(np.float32)[0]
        assert float(value) == bias
        # Or'ing a code 0..15 into the low mantissa bits reads as bias + code.
        code = np.array([(bits & 0xffff) | 9], np.uint16)
        plus = code.view(np.float16)[0] if kind == "f16" else np.array([int(code[0]) << 16], np.uint32).view(np.float32)[0]
        assert float(plus) == bias + 9


def test_target_arch_and_sm90_need():
    assert cuda_target_arch(SM90, "wgmma.fence") == "sm_90a"
    assert cuda_target_arch(SM90, "setmaxnreg.inc") == "sm_90a"
    assert cuda_target_arch(SM90, "mma.sync") == "sm_90"
    assert cuda_target_arch(SM80, "wgmma.fence") == "sm_80"
    assert source_needs_sm90("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64")
    assert not source_needs_sm90("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64")
    assert source_needs_sm90("setmaxnreg.dec")
    assert "sm_90a" in CudaDialect(SM90).compile_note("wgmma.fence") and "compute_90a" in CudaDialect(SM90).compile_note("wgmma.")
    assert "sm_90a" not in CudaDialect(SM90).compile_note("")


def test_intrinsics_are_defined_only_where_called():
    d = CudaDialect(SM90)
    call = d.cp_async("cg", 16, "dst", "src")
    d.wgmma_fence()                          # recorded, but not in the body below
    helpers = d.helpers_for(call)
    assert "ptx_cp_async_cg_16(" in call and "INLINE void ptx_cp_async_cg_16(" in helpers
    assert "wgmma" not in helpers
    assert "ptx_cp_async_cg_16_zfill" in d.cp_async("cg", 16, "dst", "src", src_bytes="n")


def test_call_forms():
    d = CudaDialect(SM90)
    assert d.sync_units(1, 256) == "ptx_named_barrier(1u, 256u);"
    assert d.sync_units("wg + 1", 128) == "ptx_named_barrier((unsigned)(wg + 1), 128u);"
    assert d.tma_load("dst", "map_a", "bar", ["x", "y"]) == "ptx_tma_load_2d(dst, &map_a, bar, (int)(x), (int)(y));"
    assert "(unsigned short)(mask)" in d.tma_load("dst", "m", "bar", ["x", "y"], multicast="mask")
    assert d.tma_store("m", "src", ["i", "j", "k"]).startswith("ptx_tma_store_3d(&m, src, (int)(i)")
    assert d.dequant_pair("bf16", "c", "s", "z") == "ptx_dequant_pair_bf16((c) | 0x43004300u, s, z)"
    assert d.pack16x2("bf16", "h", "l") == "ptx_cvt_rn_bf16x2(h, l)"
    assert d.wmma_fragment("matrix_a", 16, "f16", "row_major") == \
        "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major>"
    assert d.wmma_fragment("accumulator", 8, None) == "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float>"


@pytest.mark.nvcc
def test_a_kernel_of_its_intrinsics_compiles_for_sm_90a():
    nvcc = nvcc_or_skip()
    d = CudaDialect(SM90)
    lines = [
        d.ldmatrix(["r[0]", "r[1]", "r[2]", "r[3]"], d.shared_address("sh"), trans=True),
        d.mma_sync((16, 8, 16), "bf16", "f32", "f32", "acc", "r", "r", 4, 2),
        d.dmma((16, 8, 8), "dacc", "dsh", "dsh"),
        "r[0] = " + d.pack16x2("f16", "acc[0]", "acc[1]") + ";",
        "r[1] = " + d.dequant_pair("f16", "r[2]", "r[3]", d.dequant_pair_zero("f16", "3.0f")) + ";",
        d.cp_async("cg", 16, d.shared_address("sh"), "g", src_bytes="8"), d.cp_async_commit(), d.cp_async_wait(0),
        d.mbarrier_init(d.shared_address("bars"), 1), d.fence_mbarrier_init(), d.cluster_sync(),
        d.mbarrier_arrive_expect_tx(d.shared_address("bars"), 4096),
        d.tma_load(d.shared_address("sh"), "tmap", d.shared_address("bars"), ["4", "8"]),
        d.mbarrier_wait(d.shared_address("bars"), "0"),
        d.wgmma_fence(), d.wgmma(64, 16, "bf16", (0, 0), "acc", "desc", "desc"), d.wgmma_commit(), d.wgmma_wait(0),
        d.pin_registers("acc", 32), d.fence_proxy_async(),
        d.tma_store("tmap", d.shared_address("sh"), ["0", "0"]), d.bulk_commit(), d.bulk_wait(0, True),
        d.sync_units(1, 128), d.store_global_v4("g", ["acc[0]", "acc[1]", "acc[2]", "acc[3]"]),
        d.load_global_l2_v4("g", ["acc[0]", "acc[1]", "acc[2]", "acc[3]"]),
        d.flag_release("flags"), d.flag_acquire_clear("flags"), d.setmaxnreg(True, 232),
        d.mbarrier_arrive_remote(d.shared_address("bars"), d.cluster_rank()),
        "g[0] += " + d.vector_ref("global", "f32", 4, "g", const=True) + ".x + "
        + d.stream_vector("f32", 4, "g") + ".y + (float)" + d.plane_uniform("threadIdx.x") + ";",
        f"atomicAdd(flags + 1, {d.ticket('flags + 2')});",
    ]
    body = "\n    ".join(lines)
    kernel = (f"KERNEL void {d.cluster_dims(2)} gemm_engine_dialect_check(float* g, unsigned* flags, "
              f"{d.by_value_param('tmap', 128, 64)}, unsigned long long desc) {{\n"
              "    __shared__ __align__(128) unsigned short sh[4096];\n    __shared__ __align__(8) unsigned long long bars[2];\n"
              "    __shared__ double dsh[8];\n    float acc[32] = {0};\n    double dacc[4] = {0};\n    unsigned r[4] = {0};\n"
              f"    {body}\n    g[threadIdx.x] = acc[threadIdx.x & 31] + (float)dacc[0] + (float)r[0];\n}}\n")
    source = d.preamble([BFLOAT16, FLOAT16]) + d.helpers_for(kernel) + kernel
    ok, log = compile_cuda(source, nvcc, SM90A)
    assert ok, log[-4000:]
