"""``direct_vector``: the CPU path. Vector register tiles read the operands where they lie.

`VectorTile` (explicit ``float16`` / ``double8`` registers: a micro-kernel of tile_m x tile_n)
under `DirectUnitStage` (the unit stage reading global memory through run-time leading dimensions)
under `DirectGlobalMatmul` (no loaders, no shared memory, no barrier: edge cubes move back inside
the problem) under the partitioned batch level, walking the tiles down each column
(``col_major``), so consecutive cubes share the rhs panel (K x tile_n) while it is in cache and
each streams only its own lhs rows.

Why this shape on a CPU (PoCL): a GPU kernel's shared-memory stage costs a CPU a copy and a barrier
per K step, and PoCL keeps a work-item's registers in memory across a barrier; here a work-group is
one work-item that keeps its whole tile in vector registers for all of K, and L1 / L2 hold the
panels it reads. OpenCL only; float32, float64, float16 and bfloat16 operands (converted as they
are read), a row-major rhs (a column-major one is refused: vectors are read along n). Its tilings:
selector/cpu.py.
"""
from __future__ import annotations

from ..batch.dispatch import ColMajorDispatch
from ..global_.direct import DirectGlobalMatmul
from ..selector.cpu import cpu_tuning_space, select_cpu_tiling
from ..stage.direct import DirectUnitStage
from ..tile.vector import VectorTile
from .base import Algorithm, register


@register
class DirectVectorAlgorithm(Algorithm):
    name = "direct_vector"
    selection_name = "DirectSelection"
    tile = VectorTile
    stage = DirectUnitStage
    lhs_loader = rhs_loader = None
    global_ = DirectGlobalMatmul
    dispatch = ColMajorDispatch

    def select(self, problem, dialect):
        return select_cpu_tiling(problem, dialect)

    def tuning_space(self, problem, dialect):
        return cpu_tuning_space(problem, dialect, self.select(problem, dialect))


#: The CPU path's tiling: the vector tile (tile_m x tile_n of vector_width-wide registers), the
#: stage (one unit per cube by default: stage_m = tile_m, stage_n = tile_n), stage_k (k steps unrolled).
DirectSelection = DirectVectorAlgorithm.selection_class
