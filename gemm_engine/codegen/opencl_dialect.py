"""The OpenCL dialect: OpenCL C words for the neutral vocabulary (PoCL, NVIDIA's driver, any ICD)."""
from __future__ import annotations

from .dialect_base import Dialect

# A plane's m16n8k16 product emulated through shared memory (mma.sync's register layout, float32
# sums): each lane writes its fragments' elements, a barrier, each lane sums its four outputs, a
# barrier. Correct anywhere (it is how PoCL checks the decode kernel's fragment arithmetic), slow.
_MMA_EMULATION = """
INLINE float ge_bits16_f32(uint bits, int bf16) {
    if (bf16) return as_float(bits << 16);
    ushort h = (ushort)bits;
    return vload_half(0, (const half*)&h);
}
INLINE void ge_mma16816(__local float* s, int lane, float* c, const uint* a, const uint* b, int bf16) {
    const int g = lane >> 2, t = lane & 3;
    __local float* sa = s;
    __local float* sb = s + 256;
    for (int r = 0; r < 4; ++r) {
        const int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
        sa[row * 16 + col] = ge_bits16_f32(a[r] & 0xffffu, bf16);
        sa[row * 16 + col + 1] = ge_bits16_f32(a[r] >> 16, bf16);
    }
    for (int r = 0; r < 2; ++r) {
        const int k = 2 * t + 8 * r;
        sb[k * 8 + g] = ge_bits16_f32(b[r] & 0xffffu, bf16);
        sb[(k + 1) * 8 + g] = ge_bits16_f32(b[r] >> 16, bf16);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float sum = 0.0f;
        for (int k = 0; k < 16; ++k) sum += sa[row * 16 + k] * sb[k * 8 + col];
        c[e] += sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}
"""
_PACK_F16 = """
INLINE uint ge_pack_f16x2(float hi, float lo) {
    ushort h[2];
    vstore_half_rte(lo, 0, (half*)h);
    vstore_half_rte(hi, 1, (half*)h);
    return (uint)h[0] | ((uint)h[1] << 16);
}
"""
_PACK_BF16 = """
INLINE uint ge_pack_bf16x2(float hi, float lo) {
    return (uint)f32_to_bf16(lo) | ((uint)f32_to_bf16(hi) << 16);
}
"""


class OpenCLDialect(Dialect):
    backend = "opencl"

    def compile_note(self, source: str) -> str:
        return "/* build: OpenCL C 1.2 (clBuildProgram options \"-cl-std=CL1.2\") */\n"
    _preamble = r"""
#define KERNEL __kernel
#define LAUNCH_BOUNDS(n) __attribute__((reqd_work_group_size(n, 1, 1)))
#define LAUNCH_BOUNDS_MIN(n, c) __attribute__((reqd_work_group_size(n, 1, 1)))
#define GLOBAL __global
#define LOCAL __local
#define RESTRICT restrict
#define INLINE static inline
#define UNIT_ID ((int)get_local_id(0))
#define CUBE_ID ((i64)get_group_id(0))
#define CUBE_COUNT ((i64)get_num_groups(0))
#define SYNC_CUBE() barrier(CLK_LOCAL_MEM_FENCE)
#define ALIGN16 __attribute__((aligned(16)))
#define FLOAT_AS_UINT(x) as_uint(x)
#define UINT_AS_FLOAT(x) as_float(x)
typedef long i64;
"""
    _local_pointer_space = "__local"
    # `half` pointers are legal without cl_khr_fp16 as long as only vload_half/vstore_half touch them.
    _c_types = {"f32": "float", "f64": "double", "f16_bits": "half", "bf16_bits": "ushort",
                "i8": "char", "i32": "int", "i64": "i64",
                "f8e4m3": "uchar", "f8e5m2": "uchar", "u32": "uint"}   # OpenCL's char is signed by the spec (C leaves it open)

    _on_demand = {"ge_mma16816": _MMA_EMULATION, "ge_pack_f16x2": _PACK_F16, "ge_pack_bf16x2": _PACK_BF16}

    def supports(self, feature: str) -> bool:
        return feature == "plane_mma" or super().supports(feature)

    def plane_mma_scratch(self) -> int:
        return 16 * 16 + 16 * 8

    def plane_mma(self, kind: str, acc: str, a: str, b: str, scratch: str) -> str:
        return f"ge_mma16816({scratch}, UNIT_ID % 32, {acc}, {a}, {b}, {int(kind == 'bf16')});"

    def pack16x2(self, kind: str, hi: str, lo: str) -> str:
        return f"ge_pack_{kind}x2({hi}, {lo})"

    # OpenCL 1.2's fence orders one work-item's accesses; what another work-group then reads is the
    # device's coherence (PoCL and NVIDIA's driver keep global memory coherent at atomics).
    def fence_device(self) -> str:
        return "mem_fence(CLK_GLOBAL_MEM_FENCE);"

    def ticket(self, pointer: str) -> str:
        return f"atomic_inc((volatile __global uint*)({pointer}))"

    def load_other_cube(self, ctype: str, pointer: str, index: str) -> str:
        return f"((volatile const __global {ctype}*)({pointer}))[{index}]"

    def _fp64_enable(self) -> str:
        return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"

    def _load_f16(self, ptr, index):
        return f"vload_half(0, {ptr} + ({index}))"

    def _store_f16(self, ptr, index, value):
        return f"vstore_half_rte({value}, 0, {ptr} + ({index}));"
