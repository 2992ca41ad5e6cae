"""components.py: the one import place for composing -- every built-in component by slot, each
class providing the slot's interface, and a composition written from these names alone runs."""
from __future__ import annotations

from gemm_engine import components
from gemm_engine.components import (BUILT_IN, Algorithm, BatchMatmul, Dispatch, GlobalMatmul, Loader, StageMatmul,
                                    StageEventListener, TileMatmul)
from helpers import assert_close, random

BASES = {"tile": TileMatmul, "stage": StageMatmul, "lhs_loader": Loader, "rhs_loader": Loader,
         "global_": GlobalMatmul, "listener": StageEventListener, "batch": BatchMatmul, "dispatch": Dispatch}


def test_built_ins_by_slot():
    assert set(BUILT_IN) == set(BASES) | {"writer"}
    for slot, classes in BUILT_IN.items():
        assert len(set(classes)) == len(classes)
        for cls in classes:
            assert getattr(components, cls.__name__) is cls
            if slot in BASES:
                assert issubclass(cls, BASES[slot]), (slot, cls)
            else:
                assert callable(getattr(cls, "write")) and callable(getattr(cls, "setup"))


def test_all_names_are_exported():
    assert "BUILT_IN" in components.__all__ and "RegisterTile" in components.__all__
    assert not any(name.startswith("_") for name in components.__all__)


def test_a_composition_from_these_names_runs(opencl_engine, rng):
    class Mine(Algorithm):
        name = "components_test"
        tile = components.RegisterTile
        stage = components.UnitPartitionedStage
        lhs_loader = components.TilewiseLoader
        rhs_loader = components.CyclicLoader
        global_ = components.DoubleBufferingGlobalMatmul
        dispatch = components.SwizzledDispatch

        def select(self, problem, dialect):
            return {"tile_m": 4, "tile_n": 2, "stage_m": 32, "stage_n": 32, "stage_k": 8}
    a, b = random(rng, (45, 19), "float32"), random(rng, (19, 37), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm=Mine()), a, b, "float32")
