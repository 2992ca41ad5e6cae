"""Tiling of ``quantized_specialized_wgmma`` (algorithms/quantized_specialized.py): the dense
Hopper kernel's choice for the same product (`dense_view`), its ring refitted to slots that also
hold the packed words, no clusters (a converted slot is not multicast)."""
from __future__ import annotations

from ..batch.dequantize_first import dense_view
from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from ..global_.read.converting_loader import SLOT_K, slot_bytes
from .specialized_wgmma import MIN_STAGES, SLACK, select_specialized_tiling



def converting_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    chosen = dict(select_specialized_tiling(dense_view(problem), dialect))
    chosen.pop("cluster_m", None)
    chosen.update(fit_ring(problem, dialect, chosen))
    return chosen


def fit_ring(problem: MatmulProblem, dialect: Dialect, chosen: dict) -> dict:
    """``stages`` and the output staging (``tma_store``, ``store_parts``) that fit beside slots of
    the 16-bit operands and the packed words: the chosen slots where they fit, else fewer (at least
    `MIN_STAGES`) before staging in more parts, else direct stores."""
    tile_m = chosen["warpgroups_m"] * chosen["partition_m"] * 64
    tile_n = chosen["warpgroups_n"] * chosen["tile_n"]
    slot = tile_m * SLOT_K * problem.lhs.itemsize + slot_bytes(SLOT_K, tile_n, problem.weights)
    room = dialect.device.max_shared_memory - SLACK
    whole = tile_m * tile_n * problem.out.itemsize
    want = chosen["stages"]
    if chosen.get("tma_store", True) and not problem.epilogue.paired:
        for stages in range(want, MIN_STAGES - 1, -1):
            for parts in (1, 2, 4):
                if (tile_n // parts) * problem.out.itemsize % 128 == 0 and room - whole // parts >= stages * slot:
                    return dict(stages=stages, tma_store=True, store_parts=parts)
    return dict(stages=min(want, room // slot), tma_store=False, store_parts=1)
