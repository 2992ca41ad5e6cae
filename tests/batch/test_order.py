"""batch/order.py: the dispatch contract -- every registered order, rendered as the inline function
(`Dispatch.function`), run on PoCL over every cube of several grids: a bijection onto (batch, row,
column); the scope's checks and call, `define`'s refusals naming the order and the batch level, an
old-form order rebound to another scope, `dispatch_for` and `register_dispatch`."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from gemm_engine.batch import dispatch as _builtin  # noqa: F401  (registers the built-in orders)
from gemm_engine.batch.order import (DISPATCH_FUNCTION, DISPATCHES, Dispatch, DispatchScope, dispatch_for,
                                     register_dispatch)
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.errors import SetupError
from helpers import cl_run

GRIDS = [(1, 1, 1), (1, 7, 5), (3, 4, 9), (2, 13, 3), (1, 16, 16)]    # (batch, cubes_m, cubes_n)


def _orders():
    out = []
    for name, cls in sorted(DISPATCHES.items()):
        out += [(name, w) for w in ((1, 3, 4) if cls.has_width else (0,))]
    return out


@pytest.mark.parametrize("name, width", _orders())
def test_every_order_is_a_bijection_on_pocl(opencl_engine, name, width):
    order = dispatch_for(name, width)
    d = dialect_for(opencl_engine.device)
    source = d.preamble(()) + order.function() + """
__kernel void walk(__global const long* cubes, __global long* out) {
    const size_t i = get_global_id(0);
    const long batch = cubes[4 * i], cubes_m = cubes[4 * i + 1], cubes_n = cubes[4 * i + 2], cube = cubes[4 * i + 3];
    i64 b, row, col;
    """ + f"{DISPATCH_FUNCTION}(cube, cubes_m, cubes_n, batch, &b, &row, &col);" + """
    out[3 * i] = b; out[3 * i + 1] = row; out[3 * i + 2] = col;
}
"""
    # Every cube of every grid in one launch: (batch, cubes_m, cubes_n, cube) per work-item.
    table = np.array([(g[0], g[1], g[2], c) for g in GRIDS for c in range(g[0] * g[1] * g[2])], np.int64)
    got = cl_run(opencl_engine, source, "walk", [table, np.full(3 * len(table), -1, np.int64)],
                 len(table)).reshape(-1, 3)
    start = 0
    for batch, cm, cn in GRIDS:
        total = batch * cm * cn
        part = got[start:start + total]
        start += total
        assert ((part >= 0) & (part < [batch, cm, cn])).all(), (name, width, batch, cm, cn)
        assert len({tuple(t) for t in part}) == total


def test_scope_checks_and_call():
    with pytest.raises(ValueError, match="output 'b-1' is not a C name"):
        DispatchScope(b="b-1")
    with pytest.raises(ValueError, match=r"input 'a \+ 1' must be a name, a number or parenthesized"):
        DispatchScope(cube="a + 1")
    scope = DispatchScope(cube="(t * 2)", b="tb", row="tr", col="tc")
    assert scope.call() == ["i64 tb, tr, tc;", f"{DISPATCH_FUNCTION}((t * 2), cubes_m, cubes_n, batch, &tb, &tr, &tc);"]


@dataclass(frozen=True)
class _NoRender(Dispatch):
    name = "no_render_test"


@dataclass(frozen=True)
class _NotText(Dispatch):
    name = "not_text_test"

    def render(self, scope):
        return 3


@dataclass(frozen=True)
class _Missing(Dispatch):
    name = "missing_test"

    def render(self, scope):
        return f"const i64 {scope.b} = 0; const i64 {scope.row} = {scope.cube};"


@dataclass(frozen=True)
class _OldForm(Dispatch):
    name = "old_form_test"

    def render(self):
        return "const i64 b = 0; const i64 cube_row = cube % cubes_m; const i64 cube_col = cube / cubes_m;"


def test_define_refusals_name_the_order_and_the_batch_level():
    with pytest.raises(SetupError, match="has no render") as info:
        _NoRender().define(consumer="my_batch")
    assert info.value.component == "my_batch"
    with pytest.raises(SetupError, match="returned int, not C source"):
        _NotText().define()
    with pytest.raises(SetupError, match="_Missing") as info:
        _Missing().define()
    assert "col" in str(info.value)


def test_an_old_form_order_is_rebound_to_another_scope():
    scope = DispatchScope(cube="tile", b="tb", row="tr", col="tc", prefix="p_")
    code = _OldForm().define(scope)
    assert "const i64 p_in_cube = tile;" in code
    assert code.rstrip().endswith("const i64 tc = p_out_col;")
    assert _OldForm().define() == _OldForm().render()       # the fixed names: as written


def test_dispatch_for_and_register():
    assert dispatch_for("row_major", 99) == dispatch_for("row_major", 1)    # no width: not in the key
    with pytest.raises(SetupError, match="unknown dispatch 'zigzag'"):
        dispatch_for("zigzag", 1, component="b")
    wide = next(n for n, c in DISPATCHES.items() if c.has_width)
    with pytest.raises(SetupError, match="needs a positive width"):
        dispatch_for(wide, 0)
    with pytest.raises(TypeError, match="expected a Dispatch subclass"):
        register_dispatch(int)
    with pytest.raises(Exception, match="row_major"):
        register_dispatch(type("Again", (DISPATCHES["row_major"],), {"name": "row_major"}))
