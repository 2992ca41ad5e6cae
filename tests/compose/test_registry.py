"""One registry rule: a taken name is refused unless replace=True, and a name re-registered (or a
slot swapped) after use is never answered with the code compiled for its old meaning, on the host
path and on the repeated-call path of device arrays alike."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

import gemm_engine
from gemm_engine.algorithms import SimpleUnitAlgorithm
from gemm_engine.components import Dispatch, RowMajorDispatch, register_dispatch
from gemm_engine.compose.registry import Registry, generation
from helpers import random, reference, rel_error


def test_every_registry_refuses_a_taken_name():
    with pytest.raises(ValueError, match="activation name 'relu' is taken"):
        @gemm_engine.register_activation
        class MyRelu(gemm_engine.Activation):
            name = "relu"
    with pytest.raises(ValueError, match="dispatch order name 'row_major' is taken"):
        @register_dispatch
        @dataclass(frozen=True)
        class Mine(Dispatch):
            name: ClassVar[str] = "row_major"
    with pytest.raises(ValueError, match="algorithm name 'simple_unit' is taken"):
        @gemm_engine.register
        class Again(SimpleUnitAlgorithm):
            name = "simple_unit"


def test_changes_advance_the_generation():
    registry = Registry("thing")
    before = generation()
    registry.register("x", 1)
    registry.pop("x")
    assert generation() == before + 2


@pytest.fixture
def cleanup():
    undo = []
    yield undo
    for fn in reversed(undo):
        fn()


def _device_call(engine, a, b, **kw):
    rt = engine.runtime
    return rt.to_host(engine.matmul(rt.to_device(a), rt.to_device(b), **kw))


def test_a_replaced_activation_runs_its_new_code_on_device_arrays(opencl_engine, rng, cleanup):
    @gemm_engine.register_activation
    class Shift(gemm_engine.Activation):
        name = "test_shift"

        def render(self, x, m):
            return f"({x} + {m.lit(1.0)})"

        def reference(self, x):
            return x + 1
    cleanup.append(lambda: gemm_engine.ACTIVATIONS.pop("test_shift"))
    a, b = random(rng, (20, 12), "float32"), random(rng, (12, 9), "float32")
    for _ in range(2):      # planned, then the repeated-call path
        assert rel_error(_device_call(opencl_engine, a, b, activation="test_shift"), reference(a, b) + 1) < 2e-5

    @gemm_engine.register_activation(replace=True)
    class Shift2(gemm_engine.Activation):
        name = "test_shift"

        def render(self, x, m):
            return f"({x} - {m.lit(5.0)})"

        def reference(self, x):
            return x - 5
    for _ in range(2):
        assert rel_error(_device_call(opencl_engine, a, b, activation="test_shift"), reference(a, b) - 5) < 2e-5


def test_a_replaced_dispatch_and_algorithm_name_run_the_new_code(opencl_engine, rng, cleanup):
    @register_dispatch
    @dataclass(frozen=True)
    class Plain(RowMajorDispatch):
        name: ClassVar[str] = "test_order"
    cleanup.append(lambda: gemm_engine.components.DISPATCHES.pop("test_order"))

    class Named(SimpleUnitAlgorithm):
        name = "test_named"
    gemm_engine.register(Named)
    cleanup.append(lambda: gemm_engine.algorithms.REGISTRY.pop("test_named"))
    a, b = random(rng, (70, 20), "float32"), random(rng, (20, 70), "float32")
    for _ in range(2):
        assert rel_error(_device_call(opencl_engine, a, b, algorithm=SimpleUnitAlgorithm(dispatch="test_order")),
                         reference(a, b)) < 2e-5
        _device_call(opencl_engine, a, b, algorithm="test_named")
    assert opencl_engine.last_choice[0].name == "test_named"

    @register_dispatch(replace=True)
    @dataclass(frozen=True)
    class Broken(Dispatch):
        """Every cube computes tile (0, 0): a wrong order whose effect the result shows."""
        name: ClassVar[str] = "test_order"

        def render(self):
            return "const i64 b = 0; const i64 cube_row = 0; const i64 cube_col = 0;"
    rt = opencl_engine.runtime
    out = rt.to_device(np.zeros((70, 70), np.float32))
    opencl_engine.matmul(rt.to_device(a), rt.to_device(b), out=out, algorithm=SimpleUnitAlgorithm(dispatch="test_order"))
    got = rt.to_host(out)
    assert np.all(got[64:, :] == 0) and rel_error(got, reference(a, b)) > 0.1   # the new order ran: tile (0, 0) only

    class Other(SimpleUnitAlgorithm):
        name = "test_named"
        tile_marker = True
    gemm_engine.register(Other, replace=True)
    _device_call(opencl_engine, a, b, algorithm="test_named")
    assert type(opencl_engine.last_choice[0]) is Other


def test_a_slot_swapped_after_use_runs_the_new_composition(opencl_engine, rng):
    class Swapped(SimpleUnitAlgorithm):
        name = "test_swapped"
    a, b = random(rng, (70, 20), "float32"), random(rng, (20, 70), "float32")
    for _ in range(2):
        _device_call(opencl_engine, a, b, algorithm=Swapped)
    assert opencl_engine.last_choice[1].batch.dispatch.name == "row_major"
    Swapped.dispatch = gemm_engine.components.ColMajorDispatch
    got = _device_call(opencl_engine, a, b, algorithm=Swapped)
    assert opencl_engine.last_choice[1].batch.dispatch.name == "col_major"
    assert rel_error(got, reference(a, b)) < 2e-5
