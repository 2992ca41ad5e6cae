"""Loaders: every element of a stage tile is moved exactly once, by any mapping; tilewise and
cyclic loaders give the same results end to end."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm, UnitSelection
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.loaders import CyclicLoader, OperandTile, TilewiseLoader
from gemm_engine.problem import Layout
from helpers import assert_close, random


def covered(loader, rows, cols, units):
    """Simulate the loader's index and guard expressions for every unit and task (C's / and % on
    non-negative ints are Python's // and %)."""
    op = OperandTile("lhs", FLOAT32, Layout.ROW, rows, cols, False, False, rows + 4, k_along_rows=False)
    cfg = loader.setup(op, units)
    seen = []
    for u in range(units):
        for t in range(cfg.tasks):
            index, guard = loader.element(cfg, t, "u")
            env = {"u": u}
            py = lambda e: e.replace("/", "//").replace("&&", "and")  # noqa: E731
            if guard is None or eval(py(guard), env):
                seen.append(eval(py(index), env))
    return sorted(seen)


@pytest.mark.parametrize("loader", [CyclicLoader(), TilewiseLoader(32), TilewiseLoader(4), TilewiseLoader(1)],
                         ids=["cyclic", "tilewise32", "tilewise4", "tilewise1"])
@pytest.mark.parametrize("rows,cols,units", [(64, 16, 256), (24, 8, 64), (16, 64, 96), (7, 5, 32)])
def test_every_element_exactly_once(loader, rows, cols, units):
    assert covered(loader, rows, cols, units) == list(range(rows * cols))


def test_tilewise_refuses_partial_groups():
    op = OperandTile("lhs", FLOAT32, Layout.ROW, 8, 8, False, False, 12, k_along_rows=False)
    with pytest.raises(SetupError, match="whole groups"):
        TilewiseLoader(32).setup(op, 48)


class TilewiseSimple(SimpleUnitAlgorithm):
    """A user composition: the simple unit algorithm with both loaders swapped for tilewise."""
    name = "tilewise_simple"
    lhs_loader = TilewiseLoader
    rhs_loader = TilewiseLoader


@pytest.mark.parametrize("shape", [(64, 64, 32), (63, 65, 17)])
def test_tilewise_end_to_end(engine, rng, shape):
    m, n, k = shape
    a, b = random(rng, (m, k), "float32"), random(rng, (k, n), "float32")
    sel = UnitSelection(tile_m=4, tile_n=4, stage_m=64, stage_n=64, stage_k=16)
    assert_close(engine.matmul(a, b, algorithm=TilewiseSimple(sel)), a, b, "float32")
    assert_close(engine.matmul(a.T.copy().T, b, algorithm=TilewiseSimple(sel)), a, b, "float32")
