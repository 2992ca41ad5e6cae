"""algorithms/grouped.py: the grouped variants (each a dense composition under a grouped batch level,
the TMA one where the dense one runs the persistent TMA pipeline), the dense problem one group looks
like, the knobs a grouped level sets itself, and ``grouped_simple_unit`` on PoCL against float64."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine import api
from gemm_engine.algorithms.grouped import (PERSISTENT, GroupedFamily, GroupedSimpleUnitAlgorithm,
                                            GroupedSpecializedWgmmaAlgorithm, grouped_variant, typical)
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.grouped import GroupedBatchMatmul
from gemm_engine.batch.grouped_tma import GroupedTmaBatchMatmul
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import Groups, MatmulProblem


def _p(layout, groups=4, m=100, n=40, k=60):
    return MatmulProblem(groups, m, n, k, FLOAT32, FLOAT32, FLOAT32, groups=Groups(layout))


@pytest.mark.parametrize("layout, sizes", [("contiguous", (4, 25, 40, 60)), ("k", (4, 100, 40, 15)),
                                           ("masked", (4, 100, 40, 60)), ("list", (4, 100, 40, 60))])
def test_typical(layout, sizes):
    t = typical(_p(layout))
    assert t.groups is None and (t.batch, t.m, t.n, t.k) == sizes


def test_variants():
    assert GroupedSimpleUnitAlgorithm.slots()["batch"] is GroupedBatchMatmul
    assert GroupedSpecializedWgmmaAlgorithm.slots()["batch"] is GroupedTmaBatchMatmul
    mine = grouped_variant(SimpleUnitAlgorithm, "my_grouped_test")
    assert mine.name == "my_grouped_test" and mine.slots()["tile"] is SimpleUnitAlgorithm.slots()["tile"]
    # the register-FMA members last: the dense one, then (after the quantized tensor-core ones) the quantized one
    assert GroupedFamily.variants.index(GroupedSimpleUnitAlgorithm) == 3
    assert GroupedFamily.variants[-1].name == "grouped_quantized_simple_unit"
    assert GroupedFamily.variants[-1].slots()["batch"] is GroupedBatchMatmul


def test_select_drops_the_dispatch_and_goes_persistent(opencl_engine):
    chosen = GroupedSimpleUnitAlgorithm().select(_p("contiguous"), opencl_engine.dialect)
    assert "dispatch" not in chosen and chosen["persistent"] == PERSISTENT


def test_on_pocl(opencl_engine, rng, monkeypatch):
    monkeypatch.setattr(api, "_default_engine", opencl_engine)
    a = rng.standard_normal((50, 24)).astype(np.float32)
    b = rng.standard_normal((3, 24, 18)).astype(np.float32)
    offsets = np.array([10, 10, 50], np.int32)
    got = opencl_engine.grouped_matmul(a, b, offsets=offsets, algorithm="grouped_simple_unit")
    ref = np.concatenate([a[:10] @ b[0].astype(np.float64), a[10:50].astype(np.float64) @ b[2]])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
