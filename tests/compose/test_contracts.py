"""compose/contracts.py: declared interfaces (checked by what a provider's methods accept, not by
its class), config fields, and the C names a component's code must define; every refusal a
SetupError naming both components."""
from __future__ import annotations

from typing import Protocol

import pytest

from gemm_engine.compose.contracts import (Capability, Requirement, check_composition, check_defines, config_gaps,
                                           declares, interface_gaps, require, require_config)
from gemm_engine.errors import SetupError


class Shape(Protocol):
    def area(self, cfg) -> int: ...

    def draw(self, d, scale: int = 1) -> str: ...


class Fields(Protocol):
    width: int
    height: int


SHAPED = Capability("shaped", "a shaped component", interface=Shape, config=Fields)


class Full:
    provides = frozenset({SHAPED})

    def area(self, cfg):
        return 0

    @staticmethod
    def draw(d, scale=1, extra=None):      # more than asked is fine
        return ""


class NoDraw:
    provides = frozenset({SHAPED})

    def area(self, cfg):
        return 0


class DrawWithoutScale(Full):
    def draw(self, d):
        return ""


class Consumer:
    name = "consumer"
    requires = (Requirement.of("tile", SHAPED),)
    uses = ("tile",)


class Level:
    """A global level composing the consumer."""

    uses = ("stage",)


def test_interface_gaps():
    assert interface_gaps(Full, SHAPED) == [] and interface_gaps(Full(), SHAPED) == []
    assert interface_gaps(NoDraw, SHAPED) == ["no method draw(d, scale=1)"]
    assert interface_gaps(DrawWithoutScale, SHAPED) == ["draw(d) cannot be called as draw(d, scale=1)"]
    assert interface_gaps(NoDraw, Capability("plain", "no interface")) == []


def test_capabilities_are_told_apart_by_name_and_meaning():
    assert SHAPED == Capability("shaped", "a shaped component") and str(SHAPED) == "a shaped component"


def test_the_composition_check_names_both_components_and_the_gap():
    check_composition({"global_": Level, "stage": Consumer, "tile": Full})
    with pytest.raises(SetupError, match=r"Consumer \('consumer'\) \(stage\) needs a shaped component from its tile; "
                                         r"NoDraw declares it but lacks its interface \(Shape\): no method draw"):
        check_composition({"global_": Level, "stage": Consumer, "tile": NoDraw}, "my_algorithm")


def test_require_at_setup():
    require("consumer", "tile", Full(), SHAPED)
    with pytest.raises(SetupError, match="needs a shaped component from its tile; NoDraw declares it but lacks") as info:
        require("consumer", "tile", NoDraw(), SHAPED)
    assert info.value.component == "consumer"
    with pytest.raises(SetupError, match="from its tile, which object does not declare"):
        require("consumer", "tile", object(), SHAPED)


def test_config_fields():
    class Cfg:
        width = 1

    assert config_gaps(Cfg(), SHAPED) == ["height"]
    with pytest.raises(SetupError, match=r"reads height of its tile's config \(Fields\); Full's Cfg has none"):
        require_config("consumer", "tile", Full(), Cfg(), SHAPED)


@pytest.mark.parametrize("code,name,expected", [
    ("const i64 b = cube / 4;", "b", True),
    ("i64 x, b;", "b", True),
    ("i64 x = 0, cube_col = 3;", "cube_col", True),
    ("i64 b;", "b", True),
    ("const int b = 0;", "b", False),                  # not an i64
    ("const i64 x = y == b ? 1 : 0;", "b", False),     # read, not declared
    ("const i64 bb = 1;", "b", False),
    ("i64 x = f(a, b);", "b", False),
])
def test_declares(code, name, expected):
    assert declares(code, name) is expected


def test_check_defines_names_both_and_the_missing_names():
    check_defines("const i64 b = 0; const i64 p_x = 1;", ["b"], "order X", "batch Y", "the contract", "p_")
    with pytest.raises(SetupError, match="order X does not define c, d: the contract") as info:
        check_defines("const i64 b = 0;", ["b", "c", "d"], "order X", "batch Y", "the contract")
    assert info.value.component == "batch Y"
    with pytest.raises(SetupError, match=r"order X declares tmp: besides b, its names must start with 'p_'"):
        check_defines("const i64 tmp = 2; const i64 b = tmp;", ["b"], "order X", "batch Y", "the contract", "p_")
