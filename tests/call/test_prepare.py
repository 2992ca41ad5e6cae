"""call/prepare.py: operands viewed on the device without copies where their strides allow (and
copies recorded where not), the MatmulProblem that follows from the request and the views, the
epilogue terms, and dense_problem's alignment from leading dimensions."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.prepare import Prepared, dense_problem, prepare
from gemm_engine.dtypes import FLOAT32, FLOAT64, INT8, INT32
from gemm_engine.problem import Layout
from helpers import call_request


def _cla():
    return pytest.importorskip("pyopencl.array")


def _device(engine, host):
    return _cla().to_device(engine.runtime.queue, host)


def test_host_operands_are_uploaded_copies(opencl_engine, rng):
    a, b = rng.standard_normal((3, 5, 7)).astype(np.float32), rng.standard_normal((7, 4)).astype(np.float32)
    arrays, request = call_request(opencl_engine, a, b)
    p = prepare(opencl_engine.runtime, arrays, request)
    pr = p.problem
    assert (pr.batch, pr.m, pr.n, pr.k) == (3, 5, 4, 7)
    assert pr.lhs == pr.rhs == pr.out == FLOAT32
    assert p.copied and p.lhs.copied and p.rhs.copied
    np.testing.assert_array_equal(p.lhs.array.get().reshape(a.shape), a)


def test_device_operands_are_read_in_place_and_transposes_are_col_major(opencl_engine, rng):
    a = _device(opencl_engine, rng.standard_normal((6, 8)).astype(np.float32))
    bt = _device(opencl_engine, rng.standard_normal((4, 8)).astype(np.float32))
    arrays, request = call_request(opencl_engine, a, bt.T)
    p = prepare(opencl_engine.runtime, arrays, request)
    assert not p.copied and p.lhs.array is a
    assert p.problem.lhs_layout is Layout.ROW and p.problem.rhs_layout is Layout.COL
    assert (p.problem.m, p.problem.n, p.problem.k) == (6, 4, 8)
    assert p.lhs.view.ld == 8 and p.rhs.view.ld == 8


def test_alignment_follows_leading_dimension(opencl_engine, rng):
    for k, align in ((8, 4), (6, 2), (7, 1)):
        a = _device(opencl_engine, rng.standard_normal((4, k)).astype(np.float32))
        b = _device(opencl_engine, rng.standard_normal((k, 8)).astype(np.float32))
        p = prepare(opencl_engine.runtime, *call_request(opencl_engine, a, b))
        assert p.problem.lhs_align == align and p.problem.rhs_align == 4


def test_mixed_dtypes_are_converted_copies_and_int8_widens(opencl_engine, rng):
    a = _device(opencl_engine, rng.standard_normal((4, 4)).astype(np.float32))
    b = _device(opencl_engine, rng.standard_normal((4, 4)))
    p = prepare(opencl_engine.runtime, *call_request(opencl_engine, a, b))
    assert p.problem.lhs == p.problem.out == FLOAT64 and p.lhs.copied and not p.rhs.copied
    ai = rng.integers(-5, 5, (4, 8)).astype(np.int8)
    p = prepare(opencl_engine.runtime, *call_request(opencl_engine, ai, ai.T.copy()))
    assert p.problem.lhs == p.problem.rhs == INT8 and p.problem.out == INT32


def test_epilogue_terms_and_problem_epilogue(opencl_engine, rng):
    a, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((3, 6)).astype(np.float32)
    c, bias = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    arrays, request = call_request(opencl_engine, a, b, c=c, bias=bias, beta=0.5, activation="relu")
    p = prepare(opencl_engine.runtime, arrays, request)
    assert set(p.terms) == {"c", "bias"}
    assert p.problem.epilogue == request.epilogue and p.problem.epilogue.activation is not None
    assert p.problem.epilogue.c is not None and p.problem.epilogue.bias is not None
    np.testing.assert_array_equal(p.c.array.get().reshape(5, 6), c)


def test_nothing_to_multiply_has_no_problem(opencl_engine):
    a, b = np.zeros((0, 3), np.float32), np.zeros((3, 4), np.float32)
    p = prepare(opencl_engine.runtime, *call_request(opencl_engine, a, b))
    assert isinstance(p, Prepared) and p.problem is None and p.lhs is None and p.terms == {}


@pytest.mark.parametrize("layout, m, k, align", [("row", 16, 12, 4), ("row", 16, 6, 2), ("col", 6, 16, 2),
                                                  ("col", 5, 16, 1)])
def test_dense_problem_alignment(layout, m, k, align):
    p = dense_problem(2, m, 32, k, np.float32, lhs_layout=Layout(layout))
    assert p.lhs_align == align and p.rhs_align == 4 and p.lhs_layout is Layout(layout)
    assert (p.batch, p.m, p.n, p.k) == (2, m, 32, k)


def test_dense_problem_types():
    p = dense_problem(1, 8, 8, 8, np.int8, precision="default")
    assert p.lhs == INT8 and p.out == INT32 and p.lhs_align == 8
    assert dense_problem(1, 8, 8, 8, "float32", precision="tf32").precision == "tf32"
