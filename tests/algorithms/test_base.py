"""algorithms/base.py: an Algorithm's selection (whole, by mapping or by keyword, checked by name),
its composed selection class, setup turning a component's crash into an internal SetupError naming
the algorithm, render, `register` refusing taken names, `resolve`, and the KernelConfig key."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.base import REGISTRY, register, resolve
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm, UnitSelection
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tile.register import RegisterTile

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
PROBLEM = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)


def test_selections_by_keyword_mapping_or_whole():
    by_kw = SimpleUnitAlgorithm(tile_m=2)
    assert by_kw.selection is None and by_kw.overrides == {"tile_m": 2}
    assert SimpleUnitAlgorithm({"tile_m": 2}).overrides == {"tile_m": 2}
    whole = SimpleUnitAlgorithm(UnitSelection(tile_m=2))
    assert whole.selection == UnitSelection(tile_m=2)
    cfg = by_kw.setup(PROBLEM, CL)
    assert cfg.batch.global_.stage.tile.tile_m == 2 and cfg.selection.tile_m == 2
    assert repr(by_kw) == "SimpleUnitAlgorithm(tile_m=2)"


def test_unknown_fields_and_values_are_refused_by_name():
    with pytest.raises(TypeError, match=r"simple_unit: no selection field\(s\) \['tile_q'\]"):
        SimpleUnitAlgorithm(tile_q=2)
    with pytest.raises((TypeError, ValueError), match="partition"):
        SimpleUnitAlgorithm(partition="diagonal")
    with pytest.raises(TypeError, match="expected a UnitSelection"):
        SimpleUnitAlgorithm(42)


def test_selection_class_is_composed_from_the_slots_knobs():
    fields = set(SimpleUnitAlgorithm.selection_class.field_names())
    assert {"tile_m", "tile_n", "stage_m", "persistent", "dispatch", "vector_width"} <= fields
    assert SimpleUnitAlgorithm.selection_class is UnitSelection


class _Crashing(RegisterTile):
    def setup(self, problem, selection, dialect):
        raise KeyError("oops")


class _CrashAlg(SimpleUnitAlgorithm):
    name = "crash_alg_test"
    tile = _Crashing


def test_a_components_crash_is_an_internal_setup_error():
    with pytest.raises(SetupError, match="a component raised KeyError") as info:
        _CrashAlg().setup(PROBLEM, CL)
    assert info.value.internal and info.value.component == "crash_alg_test"


def test_config_key_and_render():
    alg = SimpleUnitAlgorithm()
    cfg = alg.setup(PROBLEM, CL)
    assert cfg.algorithm == "gemm_engine.algorithms.simple.SimpleUnitAlgorithm" and cfg.dialect == CL.key
    assert cfg == dataclasses.replace(cfg, selection="anything")          # the selection is not in the key
    assert cfg.units == cfg.batch.units and alg.chosen(cfg) is alg
    text = alg.render(cfg, CL)
    assert text.startswith("/* gemm_engine: simple_unit (gemm_engine.algorithms.simple.SimpleUnitAlgorithm) */")
    assert max(len(line) for line in text.splitlines()) <= 160


def test_register_and_resolve():
    with pytest.raises(Exception, match="simple_unit"):
        @register
        class Again(SimpleUnitAlgorithm):
            pass
    with pytest.raises(TypeError, match="expected an Algorithm subclass"):
        register(int)
    assert isinstance(resolve("simple_unit"), SimpleUnitAlgorithm)
    assert isinstance(resolve(SimpleUnitAlgorithm), SimpleUnitAlgorithm)
    mine = SimpleUnitAlgorithm()
    assert resolve(mine) is mine
    with pytest.raises(ValueError, match="unknown name 'nope'"):
        resolve("nope")
    with pytest.raises(TypeError, match="got int"):
        resolve(3)
    assert REGISTRY["simple_unit"] is SimpleUnitAlgorithm
