"""compose/selection.py: a knob's checks naming it, composed selection types (fields from knobs,
checked on construction, shared for equal knobs, derived properties), override / merged / changed /
describe, knobs merged across components and a disagreement refused naming both."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.compose.selection import Knob, compose_selection, merge_knobs, name_selection, preset_values
from gemm_engine.errors import SetupError

KNOBS = (Knob("tile_m", 4, "rows"), Knob("mode", "a", "mode", choices=("a", "b")), Knob("fast", False, "flag"))


def test_knob_checks():
    k = Knob("tile_m", 4, "rows")
    assert k.type is int
    k.check(8, "Sel")
    with pytest.raises(TypeError, match=r"Sel.tile_m: expected an int, got bool True"):
        k.check(True, "Sel")
    with pytest.raises(TypeError, match="expected an int, got float"):
        k.check(2.0, "Sel")
    with pytest.raises(ValueError, match=r"Sel.mode: expected one of \('a', 'b'\), got 'c'"):
        KNOBS[1].check("c", "Sel")
    with pytest.raises(TypeError, match="expected a bool"):
        KNOBS[2].check(1, "Sel")


def test_composed_type():
    cls = compose_selection(KNOBS, "TestSel", __name__, {"double": lambda s: 2 * s.tile_m})
    s = cls(tile_m=8)
    assert s.field_names() == ("tile_m", "mode", "fast") and s.double == 16
    with pytest.raises(TypeError, match="TestSel.tile_m"):
        cls(tile_m="8")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.tile_m = 2
    with pytest.raises(TypeError):
        cls(8)                                            # keyword-only
    assert compose_selection(KNOBS, "Again", __name__) is compose_selection(KNOBS, "AgainToo", __name__)


def test_override_merged_changed_describe():
    cls = compose_selection(KNOBS, "TestSel2", __name__)
    s = cls()
    assert s.changed() == {} and s.describe() == "defaults" and s.override() is s
    t = s.override(tile_m=2, mode="b")
    assert t.changed() == {"tile_m": 2, "mode": "b"} and t.describe() == "tile_m=2 mode='b'"
    with pytest.raises(TypeError, match=r"has no field\(s\) \['nope'\]"):
        s.override(nope=1)
    assert s.merged({"tile_m": 3, "not_mine": 9}).tile_m == 3          # foreign fields ignored
    assert s.merged(t) == t and preset_values(t) == t.values_dict() == {"tile_m": 2, "mode": "b", "fast": False}


def test_merge_knobs():
    merged = merge_knobs([("tile", KNOBS[:1]), ("loader", (Knob("tile_m", 4, "same"), Knob("width", 1, "w")))])
    assert [k.name for k in merged] == ["tile_m", "width"]
    with pytest.raises(SetupError, match="knob 'tile_m' is declared by tile .default 4. and by stage .default 8."):
        merge_knobs([("tile", KNOBS[:1]), ("stage", (Knob("tile_m", 8, "other"),))])


def test_name_selection():
    cls = compose_selection((Knob("zz_unique", 1, "x"),), "Tmp", __name__)
    name_selection(cls, "NamedSel", "somewhere")
    assert cls.__name__ == cls.__qualname__ == "NamedSel" and cls.__module__ == "somewhere"
    assert cls.__init__.__qualname__.startswith("NamedSel.")
