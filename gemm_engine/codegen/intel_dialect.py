"""Intel's OpenCL: OpenCL C plus cl_intel_subgroup_matrix_multiply_accumulate (DPAS).

``intel_sub_group_{f16,bf16}_..._matrix_mad_k16`` multiplies an 8 x 16 tile of the sub-group's a by
a 16 x N one of b (N = the sub-group size: 8 on Xe-HPG, 16 on Xe-HPC) into float accumulators; the
kernel must ask for that sub-group size (``intel_reqd_sub_group_size``), which this dialect's
``LAUNCH_BOUNDS`` does. The capability probe builds and runs it where the device lists the
extension (feature ``intel_dpas``).
"""
from __future__ import annotations

from .opencl_dialect import OpenCLDialect

#: DPAS kinds: operand kind -> (function, k).
DPAS = {"f16": ("intel_sub_group_f16_f16_matrix_mad_k16", 16), "bf16": ("intel_sub_group_bf16_bf16_matrix_mad_k16", 16)}


class IntelOpenCLDialect(OpenCLDialect):

    def preamble(self, element_types, headers=()) -> str:
        # Every kernel runs in sub-groups of the DPAS width: the launch bounds say so too.
        return super().preamble(element_types, headers) + (
            "#undef LAUNCH_BOUNDS\n#define LAUNCH_BOUNDS(n) __attribute__((reqd_work_group_size(n, 1, 1))) "
            f"__attribute__((intel_reqd_sub_group_size({self.device.plane_size})))\n")

    def compile_note(self, source: str) -> str:
        return (f"/* build: OpenCL C 1.2 on Intel's driver, sub-groups of {self.device.plane_size}; offline: "
                f"ocloc compile -device {'pvc' if self.device.plane_size == 16 else 'dg2'} */\n")

    @staticmethod
    def plane_lane() -> str:
        return "(int)get_sub_group_local_id()"

    def dpas(self, kind: str, acc: str, a: str, b: str) -> str:
        """Statement: ``acc += a @ b`` by the sub-group's DPAS of ``kind`` (8 rows)."""
        return f"{acc} = {DPAS[kind][0]}({a}, {b}, {acc});"
