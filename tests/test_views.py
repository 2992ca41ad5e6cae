"""views.py: numpy strides to the views kernels read in place -- checked by reading every element
through the view's formula and comparing with numpy's own indexing -- and None where no view fits."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.numpy_rules import call_shape
from gemm_engine.problem import Layout
from gemm_engine.views import OperandView, c_view, flat_batch_stride, operand_view, vector_alignment


def _offset(x: np.ndarray, base: np.ndarray) -> int:
    return (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // x.itemsize


def _read_operand(base, offset, view: OperandView, batch, rows, cols):
    flat = base.ravel()
    out = np.empty((batch, rows, cols), base.dtype)
    for b in range(batch):
        for r in range(rows):
            for c in range(cols):
                inner = r * view.ld + c if view.layout is Layout.ROW else c * view.ld + r
                out[b, r, c] = flat[offset + b * view.batch_stride + inner]
    return out


CASES = {
    "row": lambda base: base[0, :5, :7],
    "row, padded ld": lambda base: base[1, 2:6, 1:4],
    "col (transposed)": lambda base: base[0, :6, :5].T,
    "batched": lambda base: base[:, :4, :3],
    "batched col": lambda base: base[1:3, :5, :6].swapaxes(-1, -2),
    "one row": lambda base: base[0, 3:4, :6],
    "one column": lambda base: base[0, :6, 2:3],
}


@pytest.mark.parametrize("case", list(CASES))
def test_views_read_the_same_elements_as_numpy(case):
    base = np.arange(3 * 8 * 9, dtype=np.float32).reshape(3, 8, 9)
    x = CASES[case](base)
    x3 = x if x.ndim == 3 else x[None]
    view = operand_view(x.shape, x.strides, x.itemsize, x3.shape[:-2])
    assert view is not None
    got = _read_operand(base, _offset(x, base), view, *x3.shape)
    np.testing.assert_array_equal(got, x3)


def test_broadcast_batch_reads_with_stride_zero():
    base = np.arange(4 * 5, dtype=np.float64).reshape(1, 4, 5)
    view = operand_view(base.shape, base.strides, 8, (3,))
    assert view.batch_stride == 0 and view.ld == 5


def test_strides_no_view_describes():
    base = np.zeros((8, 9), np.float32)
    assert operand_view(base[::2, ::2].shape, base[::2, ::2].strides, 4, ()) is None     # neither axis unit
    assert operand_view((2, 3), (12, 3), 4, ()) is None           # strides not whole elements
    b3 = np.zeros((2, 3, 4, 5), np.float32)[:, :2]               # batch axes not one flat stride
    assert operand_view(b3.shape, b3.strides, 4, (2, 2)) is None


@pytest.mark.parametrize("batch_shape, strides, expected", [((2, 3), (3, 1), 1), ((2, 3), (30, 10), 10),
                                                             ((2, 3), (0, 0), 0), ((1, 4), (99, 5), 5),
                                                             ((2, 3), (4, 1), None), ((2, 3), (3, 0), None),
                                                             ((), (), 0)])
def test_flat_batch_stride(batch_shape, strides, expected):
    assert flat_batch_stride(batch_shape, strides) == expected


@pytest.mark.parametrize("address, ld, batch, itemsize, width", [(0, 64, 0, 4, 4), (2, 64, 0, 4, 2),
                                                                  (0, 6, 0, 4, 2), (0, 64, 66, 4, 2),
                                                                  (0, 64, 0, 2, 8), (0, 64, 0, 1, 16),
                                                                  (3, 64, 0, 2, 1), (0, 64, 0, 8, 2)])
def test_vector_alignment(address, ld, batch, itemsize, width):
    assert vector_alignment(address, OperandView(Layout.ROW, ld, batch), itemsize) == width


def _read_c(base, offset, view, batch, m, n):
    flat = base.ravel()
    return np.array([[[flat[offset + b * view.batch_stride + r * view.row_stride + c * view.col_stride]
                       for c in range(n)] for r in range(m)] for b in range(batch)])


@pytest.mark.parametrize("a_shape, b_shape, make_c", [
    ((2, 4, 3), (3, 5), lambda base: base[:2, :4, :5]),           # full
    ((2, 4, 3), (3, 5), lambda base: base[0, 0, :5]),             # a row vector: broadcast
    ((2, 4, 3), (3, 5), lambda base: base[0, :4, :1]),            # a column: broadcast along N
    ((2, 4, 3), (3, 5), lambda base: base[:2, :5, :4].swapaxes(-1, -2)),
    ((4, 3), (3,), lambda base: base[0, 0, :4]),                  # matrix @ vector: c (M,)
    ((3,), (3, 5), lambda base: base[0, 1, :5]),                  # vector @ matrix: c (N,)
])
def test_c_view_reads_c_broadcast_to_the_output(a_shape, b_shape, make_c):
    base = np.arange(3 * 8 * 9, dtype=np.float32).reshape(3, 8, 9)
    shape = call_shape(a_shape, b_shape)
    c = make_c(base)
    view = c_view(c.shape, c.strides, 4, shape)
    assert view is not None
    batch = int(np.prod(shape.batch_shape)) if shape.batch_shape else 1
    got = _read_c(base, _offset(c, base), view, batch, shape.m, shape.n)
    want = np.broadcast_to(c, shape.out_shape).reshape(batch, shape.m, shape.n)
    np.testing.assert_array_equal(got, want)


def test_c_view_refuses_partial_element_strides():
    shape = call_shape((4, 3), (3, 5))
    assert c_view((4, 5), (22, 2), 4, shape) is None
