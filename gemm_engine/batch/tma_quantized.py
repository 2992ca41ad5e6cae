"""Persistent TMA batch level for quantized weights read in the kernel: `TmaKMajorBatchMatmul` whose
rhs is a prepacked weight's words (read by bulk copies, no tensor map: global_/read/
converting_loader.py) and whose signature carries the weight's scales and zeros.

The lhs is as the dense level has it (its tensor map, or a K-major copy first where TMA cannot
address it); the rhs is never copied. A bulk copy needs 16-byte-aligned sources: the words' address
and its scales' (and zeros') address and row pitch are checked per call, before the launch (a
`QuantizedWeight` made by gemm_engine always passes).
"""
from __future__ import annotations

from ..errors import SetupError
from ..problem import MatmulProblem
from .base import BatchConfig, CallValues
from .tma_k_major import TmaKMajorBatchMatmul
from .tma_persistent import device_address

_WORD_BYTES = 4


class TmaQuantizedBatchMatmul(TmaKMajorBatchMatmul):
    name = "tma_quantized_batch"
    passes_weights = True

    def check_weights(self, problem: MatmulProblem) -> None:
        if problem.weights is None:
            raise SetupError(self.name, "passes a quantized rhs's packed words and scales (gemm_engine.quantize); "
                                        "this problem's rhs is a dense array")
        super().check_weights(problem)

    def copies_for(self, problem: MatmulProblem) -> tuple[bool, bool]:
        return super().copies_for(problem)[0], False      # the packed words are read where they are

    def _maps(self, cfg: BatchConfig) -> tuple[str, ...]:
        return ("lhs_map",) + (("out_map",) if self._out_map(cfg) else ())

    def call_values(self, cfg: BatchConfig, problem: MatmulProblem) -> CallValues:
        base = super().call_values(cfg, problem)

        def derive(values: dict) -> dict:
            address = device_address(values["rhs_base"], int(values["rhs_offset"]), _WORD_BYTES)
            if address % 16:
                raise ValueError(f"qweight: its packed words start at {address:#x}, not on 16 bytes, which the "
                                 f"{self.global_.rhs_loader.name}'s bulk copies need (a QuantizedWeight made by "
                                 f"gemm_engine.quantize / prepack is)")
            for name, size in (("qscale", 2), ("qzero", 2)):      # scale rows: bulk copies too
                if f"{name}_base" in values:
                    at = device_address(values[f"{name}_base"], int(values[f"{name}_offset"]), size)
                    if at % 16 or int(values[f"{name}_ld"]) * size % 16:
                        raise ValueError(f"qweight: its {name[1:]}s start at {at:#x} with rows of "
                                         f"{values[f'{name}_ld']} elements; the bulk copies need both on 16 bytes")
            return base.derive(values)

        return CallValues(base.names, derive)
