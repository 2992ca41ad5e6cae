"""The shape/dtype front end against numpy itself, and the stride analysis that avoids copies."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.numpy_rules import call_shape, result_dtype
from gemm_engine.views import operand_view
from gemm_engine.problem import Layout

SHAPE_PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (7, 3, 4)),
               ((1, 2, 3), (6, 3, 4)), ((4, 1, 2, 3), (5, 3, 4)), ((1,), (1, 1))]


@pytest.mark.parametrize("a,b", SHAPE_PAIRS)
def test_out_shape_matches_numpy(a, b):
    assert call_shape(a, b).out_shape == np.matmul(np.ones(a), np.ones(b)).shape


@pytest.mark.parametrize("a,b,phrase", [
    ((), (3,), "does not have enough dimensions"),
    ((3,), (), "does not have enough dimensions"),
    ((2, 3), (4, 2), "mismatch in its core dimension 0"),
    ((2, 2, 3), (3, 3, 2), "could not be broadcast together"),
])
def test_errors_match_numpy(a, b, phrase):
    with pytest.raises(ValueError, match=phrase):
        call_shape(a, b)
    with pytest.raises(ValueError, match=phrase):
        np.matmul(np.ones(a), np.ones(b))


def test_result_dtype():
    assert result_dtype(np.float32, np.float16) == np.float32
    assert result_dtype(np.float16, np.float16) == np.float16
    with pytest.raises(TypeError, match="int64"):
        result_dtype(np.int64, np.float32)
    # int8 @ int8 is int32 (exact accumulation), not numpy's wrapped-around int8; with a float,
    # numpy's promotion. Other integers stay unsupported.
    assert result_dtype(np.dtype(np.int8), np.dtype(np.int8)) == np.int32
    assert result_dtype(np.int8, np.float32) == np.result_type(np.int8, np.float32)
    for dt in (np.int32, np.uint8, np.int16):
        with pytest.raises(TypeError, match=f"{np.dtype(dt).name}.*supported dtypes are .*int8"):
            result_dtype(dt, np.int8)


def view(arr, batch_shape):
    v = operand_view(arr.shape, arr.strides, arr.itemsize, batch_shape)
    return None if v is None else (v.layout, v.ld, v.batch_stride)


def test_views_of_common_layouts():
    a = np.empty((4, 6, 8), np.float32)
    assert view(a, (4,)) == (Layout.ROW, 8, 48)
    assert view(a.transpose(0, 2, 1), (4,)) == (Layout.COL, 8, 48)
    assert view(a[0], (4,)) == (Layout.ROW, 8, 0)            # broadcast batch: stride 0
    assert view(a[:, ::-1], (4,)) == (Layout.ROW, -8, 48)     # negative row stride: no copy
    assert view(a[::-1], (4,)) == (Layout.ROW, 8, -48)
    assert view(a[:, :, ::2], (4,)) is None                   # strided columns: must copy
    assert view(a[:, ::2, ::2], (4,)) is None


def test_batch_dims_collapse_or_copy():
    a = np.empty((2, 3, 4, 5), np.float32)
    assert view(a, (2, 3)) == (Layout.ROW, 5, 20)
    b = np.empty((2, 1, 4, 5), np.float32)
    assert view(b, (2, 3)) is None                             # (s, 0) is not one batch stride
    assert view(b, (2, 1)) == (Layout.ROW, 5, 20)
