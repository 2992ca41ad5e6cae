"""The OpenCL dialect: OpenCL C words for the neutral vocabulary (PoCL, NVIDIA's driver, any ICD)."""
from __future__ import annotations

from .dialect_base import Dialect


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
                "i8": "char", "i32": "int",
                "f8e4m3": "uchar", "f8e5m2": "uchar", "u32": "uint"}   # OpenCL's char is signed by the spec (C leaves it open)

    def _fp64_enable(self) -> str:
        return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"

    def _load_f16(self, ptr, index):
        return f"vload_half(0, {ptr} + ({index}))"

    def _store_f16(self, ptr, index, value):
        return f"vstore_half_rte({value}, 0, {ptr} + ({index}));"
