"""The OpenCL dialects: OpenCL C words for the neutral vocabulary (PoCL, NVIDIA's driver, any ICD).

`OpenCLDialect` is the portable one: every device, register FMA kernels. A device's vendor and
the capability probe's findings (`DeviceInfo.features`, runtime/opencl_probe.py) pick a richer one
(codegen/dialect.py, `dialect_for`): `PtxOpenCLDialect` on NVIDIA's driver, which compiles inline
PTX (``mma.sync``, ``ldmatrix``, ``cp.async``: codegen/ptx_intrinsics.py); the AMD and Intel
matrix dialects in codegen/amdgcn_dialect.py and codegen/intel_dialect.py.
"""
from __future__ import annotations

import re

from .dialect_base import Dialect
from .ptx_intrinsics import PtxIntrinsics
from . import ptx, ptx_opencl

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
typedef ulong u64;
"""
    _local_pointer_space = "__local"
    # Half precision as 16 raw bits (as on CUDA): converted through a private `half` pointer, which
    # vload_half / vstore_half accept without cl_khr_fp16, and copied as plain bits where a
    # tensor-core tile reads it raw (no `half` value is ever loaded or stored).
    _c_types = {"f32": "float", "f64": "double", "f16_bits": "ushort", "bf16_bits": "ushort",
                "i8": "char", "i32": "int", "i64": "i64",
                "f8e4m3": "uchar", "f8e5m2": "uchar", "u32": "uint"}   # OpenCL's char is signed by the spec (C leaves it open)

    _on_demand = {"ge_mma16816": _MMA_EMULATION, "ge_pack_f16x2": _PACK_F16, "ge_pack_bf16x2": _PACK_BF16}

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

    @property
    def key(self) -> tuple:
        dev = self.device
        return (self.backend, dev.vendor, dev.isa, dev.compute_capability, tuple(sorted(dev.features)))

    def supports(self, feature: str) -> bool:
        # "wide_vectors": OpenCL C's vector types up to 16 components (`load_vector` and friends).
        # "plane_mma": the emulated plane product (`plane_mma`), correct on every device.
        if feature in self.device.features or feature in ("wide_vectors", "plane_mma"):
            return True
        return super().supports(feature)

    def _fp64_enable(self) -> str:
        return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"

    # -- explicit vectors (the CPU path's register tiles: tile/vector.py) ------------------------
    #: The widths OpenCL C has vector types of.
    VECTOR_WIDTHS = (2, 4, 8, 16)

    def vector_type(self, word: str, width: int) -> str:
        return f"{self.c_type(word)}{width}"

    def splat(self, word: str, width: int, value: str) -> str:
        """Expression: ``value`` in every component of a ``width``-wide vector of ``word``."""
        return f"(({self.vector_type(word, width)})({value}))"

    def vector_fma(self, a: str, b: str, c: str) -> str:
        """Expression: ``a * b + c`` per component, fused."""
        return f"fma({a}, {b}, {c})"

    @staticmethod
    def component(vector: str, i: int) -> str:
        return f"{vector}.s{i:x}"

    def load_vector(self, et, space: str, pointer: str, width: int) -> str:
        """Expression: ``width`` consecutive elements of type ``et`` at ``pointer`` (an element
        pointer into ``space``, any alignment) as a vector of ``et``'s compute type."""
        if et.storage == "f16_bits":
            return f"vload_half{width}(0, (const {self.pointer_space(space)} half*)({pointer}))"
        if et.storage == "bf16_bits":
            return f"as_float{width}(convert_uint{width}(vload{width}(0, {pointer})) << 16)"
        return f"vload{width}(0, {pointer})"

    def _f16_helpers(self) -> str:
        return r"""
INLINE float f16_to_f32(ushort bits) { return vload_half(0, (const half*)&bits); }
INLINE ushort f32_to_f16(float value) { ushort h; vstore_half_rte(value, 0, (half*)&h); return h; }
"""


#: The probe's feature saying NVIDIA's compiler hands inline assembly *generic* addresses of local
#: memory (converted with cvta.to.shared); without it a ``__local`` pointer's value is already the
#: shared-window address (what clang's NVPTX back end does).
LOCAL_GENERIC = "local_generic"
#: The probe's feature saying only the plain ``asm`` keyword built (clang's OpenCL mode takes
#: ``__asm__`` only, NVIDIA's driver was seen to take ``asm``; the probe tries ``__asm__`` first).
ASM_PLAIN = "asm_plain"


class PtxOpenCLDialect(PtxIntrinsics, OpenCLDialect):
    """NVIDIA's OpenCL driver: OpenCL C plus inline PTX. The driver's own JIT targets the GPU's
    sm_XX, not the arch-specific sm_90a (no wgmma); where the runtime compiles the driver's PTX by
    nvJitLink for sm_90a (runtime/sass.py) the probe grants ``wgmma`` too. Which instructions are
    offered is the probe's answer (`DeviceInfo.features`)."""

    _ldmatrix_pointers = True
    _global_space = "__global"
    _sm90a_mark = ptx.SM90A_MARK

    def compile_note(self, source: str) -> str:
        arch = self.device.arch or "the device's sm_XX"
        return (f"/* build: OpenCL C 1.2 (\"-cl-std=CL1.2\") on NVIDIA's driver, inline PTX for {arch}; "
                f"offline: clang -cl-std=CL1.2 -target nvptx64-nvidia-nvcl, then ptxas */\n")

    def _asm_helper(self, built: tuple[str, str]) -> str:
        name, code = built
        if ASM_PLAIN not in self.device.features:
            code = re.sub(r"\basm\b", "__asm__", code)
        # OpenCL C reserves "long long": its 64-bit word is ulong (the wgmma descriptors').
        return self._use((name, code.replace("unsigned long long", "ulong")))

    def shared_address(self, pointer: str) -> str:
        """Expression: the 32-bit shared-window address of a ``__local`` pointer (the operand
        ldmatrix and cp.async take): the pointer's own value, or its conversion where the probe found
        the compiler passes generic addresses (`LOCAL_GENERIC`)."""
        if LOCAL_GENERIC in self.device.features:
            return f"{self._asm_helper(ptx_opencl.cvta_to_shared())}((ulong)({pointer}))"
        return f"((uint)(size_t)({pointer}))"

    def plane_uniform(self, value: str) -> str:
        """Lane 0's ``value`` by a warp shuffle, as CUDA's (codegen/cuda_dialect.py): the wgmma
        descriptors of a warpgroup index derived from it stay in uniform registers."""
        return f"{self._asm_helper(ptx_opencl.lane0_value())}({value})"

    def is_shared_window(self, value: str) -> str:
        """Expression: 1 when the 64-bit ``value`` is a generic address inside the shared window,
        else 0 (what the probe asks of a ``__local`` pointer's value: `LOCAL_GENERIC`)."""
        return f"{self._asm_helper(ptx_opencl.is_shared_window())}({value})"
