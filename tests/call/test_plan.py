"""call/plan.py: the Planner against a stand-in runtime (no compiler): a plan compiled once per
(algorithm, selection, problem) and kept least-recently-used within its capacity, sources through
the source cache, compiler failures and co-resident launches refused as SetupErrors naming the
algorithm, and `render` turning a component's crash into an internal SetupError."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.base import Launch
from gemm_engine.call.plan import CompiledLaunch, Plan, Planner, render
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import CaptureError, SetupError
from gemm_engine.problem import MatmulProblem


class _Runtime:
    """What the Planner asks of a runtime: its dialect and backend, whether it launches co-resident
    grids, and kernel(source, name) (recorded; ``fail`` raises that exception)."""

    backend = "opencl"

    def __init__(self, co_resident=True, fail=None):
        self.dialect = dialect_for(DeviceInfo("opencl", "stand-in", 4, 65536, 1024, 32))
        self.co_resident_launch = co_resident
        self.fail = fail
        self.compiled = []

    def kernel(self, source, name):
        if self.fail is not None:
            raise self.fail
        self.compiled.append(name)
        return ("kernel", name, len(source))


class _Sources:
    def __init__(self, held=None):
        self.held, self.got, self.put_keys = dict(held or {}), [], []

    def get(self, key):
        self.got.append(key)
        return self.held.get(key)

    def put(self, key, source):
        self.put_keys.append(key)
        self.held[key] = source


def _problem(m=64):
    return MatmulProblem(1, m, 64, 32, FLOAT32, FLOAT32, FLOAT32)


def test_a_plan_holds_the_compiled_launches_and_is_reused():
    rt, sources = _Runtime(), _Sources()
    planner = Planner(rt, sources=sources)
    alg = SimpleUnitAlgorithm()
    plan = planner.plan(alg, _problem())
    assert isinstance(plan, Plan) and len(planner) == 1
    [launch] = plan.launches
    assert isinstance(launch, CompiledLaunch) and launch.kernel[1] == "gemm_engine_kernel"
    cfg = alg.setup(_problem(), rt.dialect)
    assert launch.cubes == alg.cube_count(cfg, _problem()) and launch.units == cfg.units
    assert plan.signature.names == alg.signature(cfg).names and plan.config == cfg
    assert "gemm_engine_kernel" in plan.source and plan.workspace is None and plan.kept is None
    assert planner.plan(alg, _problem()) is plan and rt.compiled == ["gemm_engine_kernel"]
    # Another algorithm object of the same class and selection shares the plan.
    assert planner.plan(SimpleUnitAlgorithm(), _problem()) is plan


def test_sources_come_from_the_source_cache_and_go_into_it():
    rt = _Runtime()
    alg = SimpleUnitAlgorithm()
    sources = _Sources()
    Planner(rt, sources=sources).plan(alg, _problem())
    [key] = sources.put_keys
    assert sources.got == [key] and key is not None
    cached = _Sources({key: "/* cached */ KERNEL void gemm_engine_kernel() {}"})
    plan = Planner(rt, sources=cached).plan(alg, _problem())
    assert plan.source.startswith("/* cached */") and cached.put_keys == []


def test_capacity_drops_the_least_recently_used():
    planner = Planner(_Runtime(), capacity=2, sources=_Sources())
    alg = SimpleUnitAlgorithm()
    p64, p128 = planner.plan(alg, _problem(64)), planner.plan(alg, _problem(128))
    assert planner.plan(alg, _problem(64)) is p64              # now the most recent
    planner.plan(alg, _problem(192))
    assert len(planner) == 2
    assert planner.plan(alg, _problem(64)) is p64
    assert planner.plan(alg, _problem(128)) is not p128         # was dropped: planned again
    planner.clear()
    assert len(planner) == 0


def test_key_tells_selections_apart():
    alg = SimpleUnitAlgorithm()
    other = alg.with_selection({"tile_m": 2})
    assert Planner.key(alg, _problem()) != Planner.key(other, _problem())
    assert Planner.key(alg, _problem()) == Planner.key(SimpleUnitAlgorithm(), _problem())
    assert Planner.key(alg, _problem(64)) != Planner.key(alg, _problem(128))


def test_a_compiler_error_is_an_internal_setup_error_naming_the_kernel():
    planner = Planner(_Runtime(fail=RuntimeError("syntax error at line 3")), sources=_Sources())
    with pytest.raises(SetupError, match="rejected kernel gemm_engine_kernel: syntax error") as info:
        planner.plan(SimpleUnitAlgorithm(), _problem())
    assert info.value.internal and info.value.component == "simple_unit" and len(planner) == 0


def test_a_capture_error_passes_through():
    planner = Planner(_Runtime(fail=CaptureError("capturing")), sources=_Sources())
    with pytest.raises(CaptureError):
        planner.plan(SimpleUnitAlgorithm(), _problem())


class _CoResident(SimpleUnitAlgorithm):
    name = "co_resident_test"

    def launches(self, cfg, problem):
        return [dataclasses.replace(l, co_resident=True) for l in super().launches(cfg, problem)]


def test_co_resident_launches_need_a_runtime_that_offers_them():
    with pytest.raises(SetupError, match="cooperative launch") as info:
        Planner(_Runtime(co_resident=False), sources=_Sources()).plan(_CoResident(), _problem())
    assert info.value.component == "co_resident_test"
    plan = Planner(_Runtime(co_resident=True), sources=_Sources()).plan(_CoResident(), _problem())
    assert plan.launches[0].co_resident


class _NoDynamic(SimpleUnitAlgorithm):
    name = "no_dynamic_test"

    def launches(self, cfg, problem):
        return [Launch("gemm_engine_kernel", 1, cfg.units, dynamic_shared=False)]


def test_launches_without_dynamic_shared_memory_get_zero_bytes():
    plan = Planner(_Runtime(), sources=_Sources()).plan(_NoDynamic(), _problem())
    assert plan.launches[0].shared_bytes == 0 and plan.launches[0].cubes == 1


class _Crashing(SimpleUnitAlgorithm):
    name = "crashing_test"

    def render(self, cfg, dialect):
        raise KeyError("lanes")


def test_render_reports_a_crash_as_internal_setup_error():
    rt = _Runtime()
    alg = _Crashing()
    cfg = alg.setup(_problem(), rt.dialect)
    with pytest.raises(SetupError, match="rendering failed: KeyError") as info:
        render(alg, cfg, rt.dialect)
    assert info.value.internal and info.value.component == "crashing_test"
    refused = SetupError("x", "no")

    class Refusing(SimpleUnitAlgorithm):
        def render(self, cfg, dialect):
            raise refused
    with pytest.raises(SetupError) as info:
        render(Refusing(), cfg, rt.dialect)
    assert info.value is refused
