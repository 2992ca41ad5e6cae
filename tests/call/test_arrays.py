"""The arrays step: what numpy accepts as ``out`` (an array, or a 1-tuple holding one), refused
otherwise; ndarray subclasses come back as their class (np.matrix in, np.matrix out)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import random, reference, rel_error


@pytest.mark.parametrize("out", [[[0.0, 0.0], [0.0, 0.0]], np.float32(0), 3.0, "out"],
                         ids=["list", "numpy scalar", "float", "str"])
def test_out_that_is_not_an_array_is_refused(opencl_engine, out):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="out must be an array"):
        opencl_engine.matmul(a, a, out=out)


def test_a_one_tuple_out_is_taken_as_numpy_takes_it(opencl_engine, rng):
    a, b = random(rng, (5, 4), "float32"), random(rng, (4, 3), "float32")
    out = np.zeros((5, 3), np.float32)
    assert opencl_engine.matmul(a, b, out=(out,)) is out
    assert rel_error(out, reference(a, b)) < 2e-5
    with pytest.raises(TypeError, match="out must be an array"):
        opencl_engine.matmul(a, b, out=(out, out))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_matrix_in_matrix_out(opencl_engine):
    a, b = np.matrix([[1.0, 2.0], [3.0, 4.0]]), np.matrix([[5.0], [6.0]])
    got = opencl_engine.matmul(a, b)
    assert type(got) is np.matrix and type(np.matmul(a, b)) is np.matrix
    np.testing.assert_allclose(got, a @ b)
