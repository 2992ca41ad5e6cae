"""call/deliver.py: the result handed back in the caller's form -- a numpy array, a scalar for
vector @ vector, np.matrix for matrices, ``out`` filled and returned -- from what the kernels wrote
(here written by the test, so the step is checked alone); and calls with nothing to multiply
(K = 0: the epilogue's terms alone, against float64 on the host)."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.arguments import build_arguments
from gemm_engine.call.deliver import finish, without_kernel
from gemm_engine.call.prepare import prepare
from helpers import call_request


def _written(engine, a, b, **kw):
    """finish() of a call whose kernels 'wrote' known values: (result, what was written)."""
    rt = engine.runtime
    arrays, request = call_request(engine, a, b, **kw)
    prepared = prepare(rt, arrays, request)
    _, target = build_arguments(rt, arrays, prepared)
    values = np.arange(np.prod(target.array.shape), dtype=target.array.dtype).reshape(target.array.shape) + 1
    target.array.set(values)
    return finish(rt, arrays, request, target), values


def test_host_inputs_get_a_numpy_result_of_the_output_shape(opencl_engine):
    a, b = np.ones((2, 3, 4), np.float32), np.ones((4, 5), np.float32)
    result, values = _written(opencl_engine, a, b)
    assert type(result) is np.ndarray and result.shape == (2, 3, 5) and result.dtype == np.float32
    np.testing.assert_array_equal(result.reshape(-1), values.reshape(-1))


def test_vector_at_vector_is_a_scalar(opencl_engine):
    result, values = _written(opencl_engine, np.ones(4), np.ones(4))
    assert np.ndim(result) == 0 and not isinstance(result, np.ndarray)
    assert result == values.reshape(-1)[0]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_matrix_in_matrix_out(opencl_engine):
    result, _ = _written(opencl_engine, np.matrix(np.ones((2, 3), np.float32)), np.ones((3, 2), np.float32))
    assert type(result) is np.matrix and result.shape == (2, 2)


def test_host_out_is_filled_and_returned(opencl_engine):
    out = np.full((3, 2), -7.0, np.float32)
    result, values = _written(opencl_engine, np.ones((3, 4), np.float32), np.ones((4, 2), np.float32), out=out)
    assert result is out
    np.testing.assert_array_equal(out, values.reshape(3, 2))


def test_device_inputs_return_the_device_target(opencl_engine):
    cla = pytest.importorskip("pyopencl.array")
    a = cla.to_device(opencl_engine.runtime.queue, np.ones((3, 4), np.float32))
    result, values = _written(opencl_engine, a, a.T)
    assert isinstance(result, cla.Array) and result.shape == (3, 3)
    np.testing.assert_array_equal(result.get(), values)


def test_device_out_that_cannot_be_written_directly_gets_a_copy(opencl_engine):
    cla = pytest.importorskip("pyopencl.array")
    q = opencl_engine.runtime.queue
    a = cla.to_device(q, np.ones((4, 4), np.float32))
    base = cla.to_device(q, np.zeros((4, 8), np.float32))
    out = base[:, ::2]                   # strided: not written in place
    result, values = _written(opencl_engine, a, a, out=out)
    assert result is out
    got = base.get()
    np.testing.assert_array_equal(got[:, ::2], values.reshape(4, 4))
    assert not got[:, 1::2].any()        # the columns between untouched


def test_k_zero_without_epilogue_is_zeros_of_the_result_type(opencl_engine):
    arrays, request = call_request(opencl_engine, np.zeros((2, 3, 0), np.float16), np.zeros((0, 4), np.float16))
    result = without_kernel(opencl_engine.runtime, arrays, request)
    assert result.shape == (2, 3, 4) and result.dtype == np.float16 and not result.any()


def test_k_zero_is_the_epilogue_of_the_terms(opencl_engine, rng):
    c = rng.standard_normal((3, 4))
    bias = rng.standard_normal(4)
    arrays, request = call_request(opencl_engine, np.zeros((3, 0)), np.zeros((0, 4)), c=c, beta=-2.0, bias=bias,
                                   activation="relu")
    result = without_kernel(opencl_engine.runtime, arrays, request)
    np.testing.assert_allclose(result, np.maximum(-2.0 * c + bias, 0.0), rtol=1e-15)


def test_k_zero_row_bias_and_vector_lhs(opencl_engine, rng):
    bias = rng.standard_normal(3)
    arrays, request = call_request(opencl_engine, np.zeros((3, 0)), np.zeros((0, 2)), bias=bias, bias_axis=0)
    result = without_kernel(opencl_engine.runtime, arrays, request)
    np.testing.assert_allclose(result, np.broadcast_to(bias[:, None], (3, 2)))
    c = rng.standard_normal(5)
    arrays, request = call_request(opencl_engine, np.zeros(0), np.zeros((0, 5)), c=c, beta=1.0)
    np.testing.assert_allclose(without_kernel(opencl_engine.runtime, arrays, request), c)


def test_empty_output_is_empty_even_with_an_out(opencl_engine):
    out = np.full((0, 4), 3.0, np.float32)
    arrays, request = call_request(opencl_engine, np.ones((0, 2), np.float32), np.ones((2, 4), np.float32), out=out)
    assert without_kernel(opencl_engine.runtime, arrays, request) is out
