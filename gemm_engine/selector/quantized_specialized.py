"""Tiling of ``quantized_specialized_wgmma`` (algorithms/quantized_specialized.py): the dense
Hopper kernel's choice for the same product (`dense_view`), its 128 x 256 tile turned into 256 x 128
(`WIDE`), its ring refitted to slots that also hold the packed words, no clusters (a converted slot is not
shared: bench/SELECTION_NOTES.md, "Converted in shared memory")."""
from __future__ import annotations

from ..batch.dequantize_first import dense_view
from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from ..global_.read.converting_loader import SLOT_K, slot_bytes
from ..quant.format import STRIP_COLUMNS
from .specialized_wgmma import MIN_STAGES, SLACK, select_specialized_tiling

#: The dense kernel's 128 x 256 tile becomes 256 x 128 where 4 slots of it fit (int4): half the
#: converted columns a slot for the same products (the converting warps are what limits the kernel),
#: in 4 slots where 128 x 256 fits 3, no split tail (as measured: int4 4096 x 14336 x 1024 on the
#: H100 182 us against 212; 8-bit codes in 3 slots were not faster).
WIDE = dict(warpgroups_m=2, warpgroups_n=1, partition_m=2, tile_n=128, stages=4, split_tail=0)


def whole_strips(tiling: dict) -> bool:
    """Whether a tiling's columns are whole packed-word strips (`STRIP_COLUMNS`), which the
    converting loader writes (the dense tuning space's 32- and 96-column tiles are not)."""
    return tiling.get("warpgroups_n", 1) * tiling["tile_n"] % STRIP_COLUMNS == 0


def converting_tiling(problem: MatmulProblem, dialect: Dialect) -> dict:
    chosen = dict(select_specialized_tiling(dense_view(problem), dialect, dense_rules=False))
    chosen.pop("cluster_m", None)
    if (chosen["warpgroups_m"], chosen["partition_m"], chosen["tile_n"]) == (2, 1, 256):
        wide = {**chosen, **WIDE}
        ring = fit_ring(problem, dialect, wide)
        if ring["stages"] >= WIDE["stages"]:
            return {**wide, **ring}
    chosen.update(fit_ring(problem, dialect, chosen))
    return chosen


def fit_ring(problem: MatmulProblem, dialect: Dialect, chosen: dict) -> dict:
    """``stages`` and the output staging (``tma_store``, ``store_parts``) that fit beside slots of
    the 16-bit operands and the packed words: the most slots (the chosen count at most, at least
    `MIN_STAGES`), staged in the fewest parts where the staging fits beside them, else with direct
    stores (4 slots and direct stores measured faster than 3 and staging on 5 of 7 rows)."""
    tile_m = chosen["warpgroups_m"] * chosen["partition_m"] * 64
    tile_n = chosen["warpgroups_n"] * chosen["tile_n"]
    slot = tile_m * SLOT_K * problem.lhs.itemsize + slot_bytes(SLOT_K, tile_n, problem.weights)
    room = dialect.device.max_shared_memory - SLACK
    whole = tile_m * tile_n * problem.out.itemsize * (2 if chosen.get("schedule") == "pingpong" else 1)
    staged = chosen.get("tma_store", True) and not problem.epilogue.paired
    for stages in range(chosen["stages"], MIN_STAGES - 1, -1):
        for parts in ((1, 2, 4) if staged else ()):
            if (tile_n // parts) * problem.out.itemsize % 128 == 0 and room - whole // parts >= stages * slot:
                return dict(stages=stages, tma_store=True, store_parts=parts)
        if room >= stages * slot:
            return dict(stages=stages, tma_store=False, store_parts=1)
    return dict(stages=min(chosen["stages"], room // slot), tma_store=False, store_parts=1)
