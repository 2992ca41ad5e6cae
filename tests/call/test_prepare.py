"""call/prepare.py: operands viewed on the device without copies where their strides allow (and
copies recorded where not), the MatmulProblem that follows from the request and the views, the
epilogue terms, dense_problem's alignment from leading dimensions; and, without a device, a
list-layout call's operands read in place through offsets from one base array (CUDA): the copies
the kernel reads held until the launch, the alignment covering every group's offset, leading
dimension and extent along the contiguous axis."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.arrays import Imported
from gemm_engine.call.prepare import Prepared, _list_side, dense_problem, prepare
from gemm_engine.dtypes import FLOAT32, FLOAT64, INT8, INT32
from gemm_engine.problem import Layout
from gemm_engine.runtime.base import span_of
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



class AddressRuntime:
    """What `_list_side` reads of a CUDA runtime, over numpy arrays (addresses are their own)."""

    backend = "cuda"

    @staticmethod
    def element_address(x) -> int:
        return x.__array_interface__["data"][0] // x.itemsize

    @staticmethod
    def byte_span(x):
        return ("host",) + span_of(x.__array_interface__["data"][0], x.shape, x.strides, x.itemsize)

    @staticmethod
    def contiguous(x, dtype=None):
        return np.array(x, dtype=dtype, order="C", copy=True)


def device(x) -> Imported:
    return Imported(x, x.dtype, False, "cupy", x)


def aligned(rows, cols, rng, ld=None):
    """A float32 (rows, cols) array whose rows start 16-byte aligned, ``ld`` elements apart."""
    ld = ld or cols
    raw = np.empty(rows * ld + 16, np.float32)
    start = (-raw.__array_interface__["data"][0] // 4) % 4
    full = raw[start:start + rows * ld].reshape(rows, ld)
    full[:] = rng.standard_normal((rows, ld))
    return full[:, :cols]


def test_a_copy_the_kernel_reads_is_held_at_its_offset(rng):
    rt = AddressRuntime()
    first = aligned(24, 16, rng)
    other = np.asfortranarray(rng.standard_normal((8, 24)).astype(np.float32))   # another layout: copied
    op, at = _list_side(rt, [device(first), device(other)], np.dtype(np.float32), [(24, 16), (8, 24)])
    assert op.array is first and op.view.layout is Layout.ROW and op.copied
    (copy,) = op.holds      # without it, the copy's memory goes back to the pool before the launch
    np.testing.assert_array_equal(copy, other)
    assert at == [(0, 16), (rt.element_address(copy) - rt.element_address(first), 24)]


def test_the_alignment_divides_every_groups_contiguous_extent(rng):
    rt = AddressRuntime()
    # rows 16 elements apart, 6 used: a 4-wide vector at column 4 would cross the group's end
    xs = [aligned(4, 6, rng, ld=16), aligned(5, 8, rng)]
    op, _ = _list_side(rt, [device(x) for x in xs], np.dtype(np.float32), [(4, 6), (5, 8)])
    assert op.align == 2 and not op.holds
    op, _ = _list_side(rt, [device(aligned(4, 8, rng, ld=16)), device(aligned(5, 8, rng))], np.dtype(np.float32),
                       [(4, 8), (5, 8)])
    assert op.align == 4
