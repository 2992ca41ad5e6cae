"""codegen/comments.py: the region markers of generated source and the config fields they show."""
from __future__ import annotations

from dataclasses import dataclass

from gemm_engine.codegen.comments import plain_fields, region


@dataclass(frozen=True)
class _Inner:
    depth: int = 2


@dataclass(frozen=True)
class _Cfg:
    tile_m: int = 64
    swizzle: bool = True
    order: str = "row"
    ratio: float = 0.5          # not int / bool / str: left out
    inner: _Inner = _Inner()    # a nested config: its own region
    kind: type = int            # a type, not a value: left out


class _Component:
    name = "fancy"


class _Plain:
    pass


def test_plain_fields_lists_int_bool_str_only():
    assert plain_fields(_Cfg()) == "tile_m=64 swizzle=1 order=row"
    assert plain_fields(_Cfg(swizzle=False)) == "tile_m=64 swizzle=0 order=row"


def test_plain_fields_of_a_non_dataclass_is_empty():
    assert plain_fields(object()) == ""
    assert plain_fields({"a": 1}) == ""


def test_plain_fields_truncates_long_text():
    @dataclass
    class Long:
        text: str = "x" * 400
    out = plain_fields(Long())
    assert len(out) == 160 and out.endswith("...")


def test_region_names_level_class_name_and_fields():
    assert region("stage", _Component(), _Cfg()) == "/* == stage: _Component 'fancy': tile_m=64 swizzle=1 order=row == */"
    assert region("tile", _Plain()) == "/* == tile: _Plain == */"
    assert region("global", _Plain(), None, extra="k=3") == "/* == global: _Plain: k=3 == */"


def test_region_omits_a_name_equal_to_the_class():
    class Same:
        name = "Same"
    assert region("batch", Same()) == "/* == batch: Same == */"
