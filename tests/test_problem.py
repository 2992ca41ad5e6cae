"""problem.py: MatmulProblem's checks (sizes, precision, fp8 results), the bounds checks a stage
tile needs per axis, grouped layouts and their ragged axes, flops."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, INT8, INT32
from gemm_engine.problem import GROUP_LAYOUTS, Groups, Layout, MatmulProblem


def _p(**kw):
    return MatmulProblem(**{"batch": 1, "m": 128, "n": 96, "k": 64, "lhs": FLOAT32, "rhs": FLOAT32, "out": FLOAT32,
                            **kw})


def test_defaults():
    p = _p()
    assert p.lhs_layout is Layout.ROW and p.rhs_layout is Layout.ROW and p.lhs_align == 1
    assert p.precision == "default" and p.epilogue.identity and p.groups is None and p.weights is None
    assert Layout("col") is Layout.COL


@pytest.mark.parametrize("field, value", [("m", -1), ("k", 2.0), ("batch", "3"), ("n", None)])
def test_sizes_must_be_non_negative_ints(field, value):
    with pytest.raises(ValueError, match=f"MatmulProblem.{field} must be a non-negative int"):
        _p(**{field: value})


def test_zero_sizes_are_allowed():
    assert _p(m=0, k=0).flops == 0


def test_precision_is_checked():
    with pytest.raises(ValueError, match="precision: expected one of"):
        _p(precision="fast")
    assert _p(precision="tf32").precision == "tf32"


def test_fp8_results_are_refused():
    with pytest.raises(ValueError, match="float8_e4m3fn results are not supported"):
        _p(out=BY_NAME["float8_e4m3fn"])


@pytest.mark.parametrize("tile, expected", [((64, 32, 32), (False, False, False)), ((48, 32, 32), (True, False, False)),
                                            ((64, 64, 32), (False, True, False)), ((64, 32, 48), (False, False, True))])
def test_checks_are_the_axes_a_tile_does_not_divide(tile, expected):
    assert _p().checks(*tile) == expected


@pytest.mark.parametrize("layout, ragged", [("contiguous", {"m"}), ("masked", {"m"}), ("k", {"k"}),
                                            ("list", {"m", "n", "k"})])
def test_grouped_layouts_make_their_axes_ragged(layout, ragged):
    groups = Groups(layout)
    assert groups.ragged == frozenset(ragged)
    p = _p(groups=groups)
    assert {a for a in "mnk" if p.ragged(a)} == ragged
    # A ragged axis is checked even where the tile divides it.
    assert p.checks(64, 32, 32) == tuple(a in ragged for a in "mnk")
    assert not _p().ragged("m")


def test_unknown_group_layout_is_refused():
    with pytest.raises(ValueError, match="Groups.layout: expected one of"):
        Groups("ragged")
    assert set(GROUP_LAYOUTS) == {"contiguous", "masked", "k", "list"}


def test_flops_and_hashable_value():
    p = MatmulProblem(3, 5, 7, 11, INT8, INT8, INT32)
    assert p.flops == 2 * 3 * 5 * 7 * 11
    assert {p: 1}[dataclasses.replace(p)] == 1 and p != dataclasses.replace(p, out=FLOAT16)
