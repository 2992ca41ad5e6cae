"""AMD's OpenCL (ROCm's clang): OpenCL C plus the amdgcn matrix builtins.

CDNA GPUs (gfx908, gfx90a, gfx94x) have MFMA: ``__builtin_amdgcn_mfma_*``, one 64-wide wave
multiplying 16 x 16 tiles (f16, bf16, f32 and, from gfx90a, f64); RDNA3 GPUs (gfx11) have WMMA:
``__builtin_amdgcn_wmma_*_w32``, one 32-wide wave. The capability probe (runtime/opencl_probe.py)
builds and runs each on the device (features ``mfma``, ``mfma_f64``, ``wmma_gfx11``); clang builds
them offline for any gfx target (tests/opencl_offline.py), which is how CI checks these sources.
"""
from __future__ import annotations

from .opencl_dialect import OpenCLDialect

#: MFMA 16 x 16 kinds: operand kind -> (builtin, k, operand C type, accumulator C type).
MFMA = {
    "f16": ("__builtin_amdgcn_mfma_f32_16x16x16f16", 16, "half4", "float4"),
    "bf16": ("__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", 16, "short4", "float4"),
    "f32": ("__builtin_amdgcn_mfma_f32_16x16x4f32", 4, "float", "float4"),
    "f64": ("__builtin_amdgcn_mfma_f64_16x16x4f64", 4, "double", "double4"),
}
#: RDNA3 WMMA 16 x 16 x 16 kinds: operand kind -> (builtin, operand C type).
WMMA_GFX11 = {
    "f16": ("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32", "half16"),
    "bf16": ("__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32", "short16"),
}


class AmdgcnOpenCLDialect(OpenCLDialect):
    """AMD GPUs' OpenCL C: half precision is native (cl_khr_fp16), the matrix builtins are clang's."""

    def compile_note(self, source: str) -> str:
        isa = self.device.isa or "the device's gfx target"
        return (f"/* build: OpenCL C 1.2 on AMD's driver ({isa}); offline: clang -cl-std=CL2.0 "
                f"-target amdgcn-amd-amdhsa -mcpu={isa} -nogpulib */\n")

    def preamble(self, element_types, headers=()) -> str:
        # The builtins take half vectors: the extension is on for every kernel (all AMD GPUs have it).
        return "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n" + super().preamble(element_types, headers)

    @staticmethod
    def pack(ctype: str, width: int, elements: list[str], bits: str) -> str:
        """Expression: ``elements`` (raw ``bits``-typed values, e.g. ushort) as a ``ctype`` vector
        of ``width`` by reinterpretation (``as_half4((ushort4)(...))``); one element: a plain cast."""
        if width == 1:
            return f"({ctype})({elements[0]})"
        return f"as_{ctype}(({bits}{width})({', '.join(elements)}))"

    def mfma(self, kind: str, acc: str, a: str, b: str) -> str:
        """Statement: ``acc += a @ b`` by one wave's 16 x 16 MFMA of ``kind``."""
        builtin = MFMA[kind][0]
        return f"{acc} = {builtin}({a}, {b}, {acc}, 0, 0, 0);"

    def wmma_gfx11(self, kind: str, acc: str, a: str, b: str) -> str:
        """Statement: ``acc += a @ b`` by one 32-wide wave's 16 x 16 x 16 WMMA of ``kind``."""
        return f"{acc} = {WMMA_GFX11[kind][0]}({a}, {b}, {acc});"
