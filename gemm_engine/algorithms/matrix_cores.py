"""AMD and Intel matrix cores from OpenCL: the vendor tiles (tile/matrix_cores.py) under the plane
stage, on the simple pipeline and with double buffering.

* ``simple_mfma`` / ``double_buffering_mfma``: AMD CDNA (gfx908+; f16, bf16, f32, and f64 on gfx90a+);
* ``simple_wmma_gfx11``: AMD RDNA3 (f16, bf16);
* ``simple_dpas`` / ``double_buffering_dpas``: Intel GPUs with cl_intel_subgroup_matrix_multiply_accumulate.

Each refuses a device whose capability probe did not find its instruction. Compiled offline only
(tests/algorithms/test_matrix_cores.py): auto does not take them (selector/rules.py, UNRANKED)
until a run on the hardware checks them; name them to run them.
"""
from __future__ import annotations

from ..global_.double_buffering import DoubleBufferingGlobalMatmul
from ..selector.matrix_cores import select_matrix_tiling
from ..stage.plane_partitioned import PlanePartitionedStage
from ..tile.matrix_cores import DpasTile, Gfx11WmmaTile, MfmaTile
from .base import Algorithm, register


class _MatrixCoreAlgorithm(Algorithm):
    stage = PlanePartitionedStage
    rows = 16    # rows of the tile's instruction

    def select(self, problem, dialect):
        return select_matrix_tiling(problem, dialect, self.rows)


@register
class SimpleMfmaAlgorithm(_MatrixCoreAlgorithm):
    name = "simple_mfma"
    selection_name = "MatrixCoreSelection"
    tile = MfmaTile


@register
class DoubleBufferingMfmaAlgorithm(SimpleMfmaAlgorithm):
    name = "double_buffering_mfma"
    global_ = DoubleBufferingGlobalMatmul


@register
class SimpleWmmaGfx11Algorithm(_MatrixCoreAlgorithm):
    name = "simple_wmma_gfx11"
    tile = Gfx11WmmaTile


@register
class SimpleDpasAlgorithm(_MatrixCoreAlgorithm):
    name = "simple_dpas"
    tile = DpasTile
    rows = 8


@register
class DoubleBufferingDpasAlgorithm(SimpleDpasAlgorithm):
    name = "double_buffering_dpas"
    global_ = DoubleBufferingGlobalMatmul


#: The matrix-core algorithms' tiling: a plane selection of the vendor's instruction tile.
MatrixCoreSelection = SimpleMfmaAlgorithm.selection_class
