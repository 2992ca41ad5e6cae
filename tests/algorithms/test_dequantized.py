"""algorithms/dequantized.py: each dequantized algorithm is its dense algorithm with the batch slot
swapped for the dequantizing pass (everything else the dense one's), registered under its name, and
choosing its tiling (selection and tuning space) for the dense product after the pass."""
from __future__ import annotations

from dataclasses import asdict, is_dataclass

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.dequantized import (DequantizedPipelinedMmaAlgorithm, DequantizedPipelinedWgmmaAlgorithm,
                                                DequantizedSimpleUnitAlgorithm, DequantizedSpecializedWgmmaAlgorithm)
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm
from gemm_engine.batch.dequantize_first import DequantizeFirstBatchMatmul, TmaDequantizeFirstBatchMatmul, dense_view
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16
from gemm_engine.problem import MatmulProblem
from gemm_engine.quant import WeightFormat

H100 = dialect_for(nominal_cuda_device(9, 0))
PAIRS = [(DequantizedSpecializedWgmmaAlgorithm, SpecializedWgmmaAlgorithm, TmaDequantizeFirstBatchMatmul),
         (DequantizedPipelinedWgmmaAlgorithm, PipelinedWgmmaAlgorithm, DequantizeFirstBatchMatmul),
         (DequantizedPipelinedMmaAlgorithm, PipelinedMmaAlgorithm, DequantizeFirstBatchMatmul),
         (DequantizedSimpleUnitAlgorithm, SimpleUnitAlgorithm, DequantizeFirstBatchMatmul)]
IDS = [p[0].name for p in PAIRS]


def problem(weights=True, m=256, n=4096, k=4096, rhs_align=8):
    fmt = WeightFormat("int4", 128, True, "bf16_bits", "prepacked") if weights else None
    return MatmulProblem(1, m, n, k, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, rhs_align=rhs_align, weights=fmt)


#: A weighted problem whose packed rhs (unaligned) the dense rules tile differently from the copy.
TELLING = problem(m=4096, n=4096, k=4096, rhs_align=1)


@pytest.mark.parametrize("alg, dense, batch", PAIRS, ids=IDS)
def test_registered_with_batch_slot_swapped_only(alg, dense, batch):
    assert REGISTRY[alg.name] is alg and alg.name == f"dequantized_{dense.name}"
    assert issubclass(alg, dense) and alg.batch is batch and dense.batch is not batch
    for slot in ("tile", "stage", "global_"):
        if hasattr(dense, slot):
            assert getattr(alg, slot) is getattr(dense, slot), slot


def same_tiling(ours, theirs) -> bool:
    """Our selection holds every field of the dense one's, equal (the batch level may add its own)."""
    if not is_dataclass(theirs):
        return ours == theirs
    mine = asdict(ours)
    return all(mine[k] == v for k, v in asdict(theirs).items())


@pytest.mark.parametrize("alg, dense, batch", PAIRS, ids=IDS)
def test_tiling_is_the_dense_products(alg, dense, batch):
    p = TELLING
    assert same_tiling(alg().selection_for(p, H100), dense().selection_for(dense_view(p), H100))
    ours, theirs = alg().tuning_space(p, H100), dense().tuning_space(dense_view(p), H100)
    assert len(ours) == len(theirs) and all(same_tiling(a, b) for a, b in zip(ours, theirs))


def test_the_telling_problem_tells():
    """The check above would fail were the packed problem tiled as it stands."""
    dense = PipelinedMmaAlgorithm()
    assert not same_tiling(dense.selection_for(TELLING, H100), dense.selection_for(dense_view(TELLING), H100))


@pytest.mark.parametrize("alg, dense, batch", PAIRS, ids=IDS)
def test_dense_problem_passes_through_unchanged(alg, dense, batch):
    p = problem(weights=False, m=128, n=512, k=256)
    assert same_tiling(alg().selection_for(p, H100), dense().selection_for(p, H100))
