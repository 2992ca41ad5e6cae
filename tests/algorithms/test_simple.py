"""algorithms/simple.py: ``simple_unit``'s composition (register tile, unit stage, vector loaders,
simple global level, partitioned batch), its tiling rule setting up, and its kernels on PoCL against
float64 for every dtype it takes, int8 exactly."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm, UnitSelection
from gemm_engine.batch.partitioned import PartitionedBatchMatmul
from gemm_engine.global_.read.vector_loader import VectorLoader
from gemm_engine.global_.simple import SimpleGlobalMatmul
from gemm_engine.stage.unit_partitioned import UnitPartitionedStage
from gemm_engine.tile.register import RegisterTile
from helpers import DTYPES, assert_close, random


def test_composition():
    slots = SimpleUnitAlgorithm.slots()
    assert (slots["tile"], slots["stage"], slots["lhs_loader"], slots["rhs_loader"]) == \
        (RegisterTile, UnitPartitionedStage, VectorLoader, VectorLoader)
    assert slots["global_"] is SimpleGlobalMatmul and slots["batch"] is PartitionedBatchMatmul
    assert REGISTRY["simple_unit"] is SimpleUnitAlgorithm and SimpleUnitAlgorithm.selection_class is UnitSelection


def test_the_tiling_rule_sets_up_and_its_space_too(opencl_engine):
    d = opencl_engine.dialect
    problem = opencl_engine.problem_for(np.ones((100, 30), np.float32), np.ones((30, 70), np.float32))
    alg = SimpleUnitAlgorithm()
    chosen = alg.selection_for(problem, d)
    assert isinstance(chosen, UnitSelection)
    for preset in alg.tuning_space(problem, d):
        alg.with_selection(preset).setup(problem, d)


@pytest.mark.parametrize("dtype", DTYPES)
def test_on_pocl(opencl_engine, rng, dtype):
    a, b = random(rng, (2, 45, 23), dtype), random(rng, (23, 38), dtype)
    assert_close(opencl_engine.matmul(a, b, algorithm="simple_unit"), a, b, dtype)


def test_int8_is_exact(opencl_engine, rng):
    a = rng.integers(-128, 128, (33, 300)).astype(np.int8)
    b = rng.integers(-128, 128, (300, 17)).astype(np.int8)
    got = opencl_engine.matmul(a, b, algorithm="simple_unit")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
