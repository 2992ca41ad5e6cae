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
from . import ptx


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
    # Half precision as 16 raw bits (as on CUDA): converted through a private `half` pointer, which
    # vload_half / vstore_half accept without cl_khr_fp16, and copied as plain bits where a
    # tensor-core tile reads it raw (no `half` value is ever loaded or stored).
    _c_types = {"f32": "float", "f64": "double", "f16_bits": "ushort", "bf16_bits": "ushort",
                "i8": "char", "i32": "int",
                "f8e4m3": "uchar", "f8e5m2": "uchar"}   # OpenCL's char is signed by the spec (C leaves it open)

    @property
    def key(self) -> tuple:
        dev = self.device
        return (self.backend, dev.vendor, dev.isa, dev.compute_capability, tuple(sorted(dev.features)))

    def supports(self, feature: str) -> bool:
        # "wide_vectors": OpenCL C's vector types up to 16 components (`load_vector` and friends).
        if feature in self.device.features or feature == "wide_vectors":
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
    """NVIDIA's OpenCL driver: OpenCL C plus inline PTX (its JIT targets the GPU's sm_XX, not the
    arch-specific sm_90a: no wgmma, no setmaxnreg). Which instructions are offered is the probe's
    answer (`DeviceInfo.features`)."""

    _ldmatrix_pointers = True
    _global_space = "__global"

    def compile_note(self, source: str) -> str:
        arch = self.device.arch or "the device's sm_XX"
        return (f"/* build: OpenCL C 1.2 (\"-cl-std=CL1.2\") on NVIDIA's driver, inline PTX for {arch}; "
                f"offline: clang -cl-std=CL1.2 -target nvptx64-nvidia-nvcl, then ptxas */\n")

    def _asm_helper(self, built: tuple[str, str]) -> str:
        name, code = built
        if ASM_PLAIN not in self.device.features:
            code = re.sub(r"\basm\b", "__asm__", code)
        return self._use((name, code))

    def shared_address(self, pointer: str) -> str:
        """Expression: the 32-bit shared-window address of a ``__local`` pointer (the operand
        ldmatrix and cp.async take): the pointer's own value, or its conversion where the probe found
        the compiler passes generic addresses (`LOCAL_GENERIC`)."""
        if LOCAL_GENERIC in self.device.features:
            return f"{self._asm_helper(ptx.cvta_to_shared())}((ulong)({pointer}))"
        return f"((uint)(size_t)({pointer}))"

    def is_shared_window(self, value: str) -> str:
        """Expression: 1 when the 64-bit ``value`` is a generic address inside the shared window,
        else 0 (what the probe asks of a ``__local`` pointer's value: `LOCAL_GENERIC`)."""
        return f"{self._asm_helper(ptx.is_shared_window())}({value})"
