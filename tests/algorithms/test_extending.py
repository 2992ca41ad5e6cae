"""The README's "Adding an algorithm": three compositions a user writes without editing the package
(a dispatch order, a listener, a cross-level swap), run on every backend; what a wrong composition
gets instead (a SetupError naming the components); and what the engine does with a user algorithm
that breaks (explain, auto and tune carry on)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import pytest

import gemm_engine
from gemm_engine.algorithms.ordered import OrderedAlgorithm
from gemm_engine.components import (Dispatch, GroupedDispatch, OrderedPartitionedStage, PlanePartitionedStage, SplitKBatchMatmul,
                                    StageEventListener, TileMatmulCompleted, TilewiseLoader, register_dispatch)
from gemm_engine.algorithms.double_buffering import DoubleBufferingUnitAlgorithm
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.errors import SetupError
from helpers import assert_close, random
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import MatmulProblem
from renders import OPENCL_DEVICE

_OPENCL = dialect_for(OPENCL_DEVICE)


# -- 1. a new dispatch order --------------------------------------------------------------------------
@register_dispatch
@dataclass(frozen=True)
class ReversedDispatch(Dispatch):
    """The last output tile first: row-major order, walked backwards (each batch entry too)."""

    name: ClassVar[str] = "reversed"

    def render(self) -> str:
        return "\n".join([
            "const i64 per_batch = cubes_m * cubes_n;",
            "const i64 dispatch_r = batch * per_batch - 1 - cube;",
            "const i64 b = dispatch_r / per_batch;",
            "const i64 cube_row = (dispatch_r % per_batch) / cubes_n;",
            "const i64 cube_col = (dispatch_r % per_batch) % cubes_n;",
        ])


class ReversedSimple(SimpleUnitAlgorithm):
    name = "reversed_simple"
    dispatch = ReversedDispatch


# -- 2. a listener: a comment after every tile matmul, chained after the global level's own ----------
class CountingListener(StageEventListener):
    def on_event(self, event):
        if isinstance(event, TileMatmulCompleted):
            return f"/* tile matmul {event.i + 1} of {event.n} */"
        return ""


class CountingDoubleBuffering(DoubleBufferingUnitAlgorithm):
    name = "counting_double_buffering"
    listener = CountingListener


# -- 3. across levels: ordered global, split-K batch, tile-wise rhs loads, grouped order ------------
class OrderedSplitK(OrderedAlgorithm):
    name = "ordered_split_k"
    batch = SplitKBatchMatmul
    rhs_loader = TilewiseLoader
    dispatch = GroupedDispatch


def test_a_new_dispatch_order(engine, rng):
    a, b = random(rng, (3, 70, 45), "float32"), random(rng, (3, 45, 130), "float32")
    assert_close(engine.matmul(a, b, algorithm=ReversedSimple), a, b, "float32")
    alg, cfg = engine.last_choice
    assert "dispatch_r = batch * per_batch - 1 - cube" in alg.render(cfg, engine.dialect)
    # Registered by name, a selection of any algorithm may name it too.
    assert_close(engine.matmul(a, b, algorithm=SimpleUnitAlgorithm(dispatch="reversed")), a, b, "float32")


def test_a_listener_chains_after_the_global_levels_own(engine, rng):
    a, b = random(rng, (70, 45), "float32"), random(rng, (45, 33), "float32")
    assert_close(engine.matmul(a, b, algorithm=CountingDoubleBuffering), a, b, "float32")
    alg, cfg = engine.last_choice
    source = alg.render(cfg, engine.dialect)
    st = cfg.batch.global_.stage
    n = st.stage_k * st.partition_m * st.partition_n
    assert [int(i) for i in re.findall(rf"/\* tile matmul (\d+) of {n} \*/", source)] == list(range(1, n + 1))
    # The double-buffering listener still placed its loads: the next slice's guarded tasks.
    assert f"if (k0 + {st.stage_k} < K)" in source


def test_a_cross_level_composition(engine, rng):
    a, b = random(rng, (2, 37, 2000), "float32"), random(rng, (2, 2000, 45), "float32")
    assert_close(engine.matmul(a, b, algorithm=OrderedSplitK), a, b, "float32")
    cfg = engine.last_choice[1]
    assert cfg.batch.splits >= 2 and type(cfg.batch.dispatch) is GroupedDispatch


def test_a_wrong_composition_is_refused_naming_both_components():
    # The ordered stage reads lhs from registers only the ordered global level fills (this once
    # returned relative errors of 1.4 instead of a refusal).
    class DoubleBufferingOnOrderedStage(DoubleBufferingUnitAlgorithm):
        name = "double_buffering_on_ordered_stage"
        stage = OrderedPartitionedStage

    with pytest.raises(SetupError) as err:
        DoubleBufferingOnOrderedStage.check()
    text = str(err.value)
    assert "OrderedPartitionedStage" in text and "VectorLoader" in text and "registers" in text
    # Tensor-core stages under the ordered global level: refused before anything is set up.
    class OrderedOnTensorCores(OrderedAlgorithm):
        name = "ordered_on_tensor_cores"
        stage = PlanePartitionedStage

    with pytest.raises(SetupError, match="PlanePartitionedStage"):
        OrderedOnTensorCores.check()


@pytest.mark.parametrize("slot, value", [("dispatch", "no_such_order"), ("dispatch", GroupedDispatch()),
                                         ("stage", "ordered")])
def test_a_slot_holding_no_class_is_the_users_mistake_naming_the_slot(slot, value):
    """A string (or an instance) where a component class goes: a SetupError naming the slot, not
    "a component raised instead of refusing: a bug" (issue 35; a registered order's name in the
    dispatch slot means that order)."""
    mine = type("Mine", (SimpleUnitAlgorithm,), {"name": "mine_for_test", slot: value, "__module__": __name__})
    with pytest.raises(SetupError) as err:
        mine().setup(MatmulProblem(1, 8, 8, 8, FLOAT32, FLOAT32, FLOAT32), _OPENCL)
    assert not err.value.internal
    assert f"the {slot} slot holds {value!r}" in str(err.value) and "not a component class" in str(err.value)


def test_register_refuses_a_taken_name_unless_told():
    class Impostor(SimpleUnitAlgorithm):   # keeps its parent's name
        pass

    with pytest.raises(ValueError, match="'simple_unit' is taken by"):
        gemm_engine.register(Impostor)
    assert gemm_engine.algorithms.REGISTRY["simple_unit"] is SimpleUnitAlgorithm
    gemm_engine.register(ReversedSimple)
    try:
        gemm_engine.register(ReversedSimple)                  # the same class again: fine
        gemm_engine.register(ReversedSimple, replace=True)
    finally:
        gemm_engine.algorithms.REGISTRY.pop("reversed_simple")
    with pytest.raises(ValueError, match="'reversed' is taken"):
        register_dispatch(type("Other", (ReversedDispatch,), {"__module__": __name__}))


class Exploding(SimpleUnitAlgorithm):
    name = "exploding_for_test"

    def select(self, problem, dialect):
        raise ZeroDivisionError("a user's bug")


def test_a_user_algorithm_that_raises_breaks_nothing_else(opencl_engine, rng):
    gemm_engine.register(Exploding)
    try:
        a, b = random(rng, (40, 30), "float32"), random(rng, (30, 20), "float32")
        report = opencl_engine.explain(a, b)
        line = next(c for c in report.considered if c.name == "exploding_for_test")
        assert line.verdict == "refused" and "ZeroDivisionError" in line.reason
        assert_close(opencl_engine.matmul(a, b), a, b, "float32")          # auto is not disturbed
        with pytest.raises(SetupError, match="ZeroDivisionError: a user's bug") as err:
            opencl_engine.matmul(a, b, algorithm="exploding_for_test")   # named: refused, never run
        assert err.value.internal
    finally:
        gemm_engine.algorithms.REGISTRY.pop("exploding_for_test")


def test_overrides_merge_into_the_chosen_tiling(opencl_engine, rng):
    a, b = random(rng, (70, 45), "float32"), random(rng, (45, 66), "float32")
    chosen = SimpleUnitAlgorithm().selection_for(opencl_engine.problem_for(a, b), opencl_engine.dialect)
    alg = SimpleUnitAlgorithm(dispatch="grouped", dispatch_width=2)
    assert_close(opencl_engine.matmul(a, b, algorithm=alg), a, b, "float32")
    used = opencl_engine.last_choice[1].selection
    assert used == chosen.override(dispatch="grouped", dispatch_width=2)
    with pytest.raises(TypeError, match="no selection field"):
        SimpleUnitAlgorithm(planes_m=2)
