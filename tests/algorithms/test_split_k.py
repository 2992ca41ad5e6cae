"""algorithms/split_k.py: the split-K members (each its base algorithm with the split-K batch level)
and the family's order, its tuning space around the chosen split count, and ``split_k_unit`` on PoCL
against float64 for a long K."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.split_k import SplitKAlgorithm, SplitKMmaAlgorithm, SplitKUnitAlgorithm, SplitKWgmmaAlgorithm
from gemm_engine.batch.split_k import SplitKBatchMatmul
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, random


def test_members_swap_only_the_batch_level():
    for member in (SplitKUnitAlgorithm, SplitKMmaAlgorithm, SplitKWgmmaAlgorithm):
        slots, base = member.slots(), member.__mro__[2].slots()
        assert slots["batch"] is SplitKBatchMatmul
        assert {k: v for k, v in slots.items() if k != "batch"} == {k: v for k, v in base.items() if k != "batch"}
    assert SplitKAlgorithm.variants == (SplitKWgmmaAlgorithm, SplitKMmaAlgorithm, SplitKUnitAlgorithm)
    assert REGISTRY["split_k"] is SplitKAlgorithm


def test_tuning_space_varies_the_split(opencl_engine):
    problem = MatmulProblem(1, 32, 32, 8192, FLOAT32, FLOAT32, FLOAT32)
    space = SplitKUnitAlgorithm().tuning_space(problem, opencl_engine.dialect)
    assert len({p.get("split_k", 0) for p in space}) > 1


@pytest.mark.parametrize("algorithm", ["split_k_unit", "split_k"])
def test_on_pocl(opencl_engine, rng, algorithm):
    a, b = random(rng, (2, 24, 6000), "float32"), random(rng, (6000, 20), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm=algorithm), a, b, "float32")
