"""stage/direct.py (render only): the direct stage reads its operands where they lie: no shared memory
(leading dimensions left to run time), the lhs k-contiguous only where its tile reads so, the rhs
row-major only; its fragments are taken through the global level's operand references."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.direct import DirectUnitStage
from gemm_engine.stage.events import StageEventListener
from gemm_engine.tile.vector import VectorTile

CPU = dialect_for(nominal_opencl_device("cpu"))
F32 = BY_NAME["float32"]
PROBLEM = MatmulProblem(1, 64, 64, 32, F32, F32, F32, Layout.ROW, Layout.ROW)
SELECTION = REGISTRY["direct_vector"]().selection_for(PROBLEM, CPU)


@dataclass(frozen=True)
class Ref:
    ptr: str
    ld: str


class KMajorOnlyTile(VectorTile):
    reads_k_contiguous = False


@pytest.mark.parametrize("lhs_k", [True, False])
def test_no_shared_memory_leading_dims(lhs_k):
    cfg = DirectUnitStage(VectorTile()).setup(PROBLEM, SELECTION, CPU, lhs_k_contiguous=lhs_k)
    assert (cfg.lhs_ld, cfg.rhs_ld, cfg.lhs_k_contiguous) == (0, 0, lhs_k)
    assert (cfg.stage_m, cfg.stage_n, cfg.stage_k) == (SELECTION.stage_m, SELECTION.stage_n, SELECTION.stage_k)


def test_refusals():
    with pytest.raises(SetupError, match="rhs along n"):
        DirectUnitStage(VectorTile()).setup(PROBLEM, SELECTION, CPU, rhs_k_contiguous=True)
    with pytest.raises(SetupError, match="k-major operands only"):
        DirectUnitStage(KMajorOnlyTile()).setup(PROBLEM, SELECTION, CPU, lhs_k_contiguous=True)
    DirectUnitStage(KMajorOnlyTile()).setup(PROBLEM, SELECTION, CPU)     # a column-major lhs: fine


@pytest.mark.parametrize("lhs_k", [True, False])
def test_operand_tiles_from_references(lhs_k):
    cfg = DirectUnitStage(VectorTile()).setup(PROBLEM, SELECTION, CPU, lhs_k_contiguous=lhs_k)
    lhs = DirectUnitStage._operand(cfg, "lhs", Ref("pa", "lda"), "kk", "0")
    rhs = DirectUnitStage._operand(cfg, "rhs", Ref("pb", "ldb"), "kk", "0")
    assert (lhs.array, lhs.ld, lhs.k, lhs.k_contiguous) == ("pa", "lda", "kk", lhs_k)
    assert (rhs.array, rhs.ld, rhs.k_contiguous) == ("pb", "ldb", False)


def test_execute_reads_through_the_references():
    stage = DirectUnitStage(VectorTile())
    cfg = stage.setup(PROBLEM, SELECTION, CPU, lhs_k_contiguous=True)
    code = stage.execute(cfg, CPU, Ref("dir_lhs", "lda"), Ref("dir_rhs", "ldb"), StageEventListener())
    assert "dir_lhs" in code and "dir_rhs" in code and "lda" in code and "ldb" in code
    assert "LOCAL" not in code and "SYNC_CUBE" not in code
