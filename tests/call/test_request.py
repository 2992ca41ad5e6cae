"""The request step: every option checked once, by name, before anything runs."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import random, reference, rel_error


@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_a_number_past_float64_is_named(opencl_engine, name):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match=f"{name}=1000.* is out of the range of a float64"):
        opencl_engine.matmul(a, a, c=a, **{name: 10**400})


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("kind", ["number", "host array"])
def test_non_finite_scales_are_refused_by_name(opencl_engine, value, kind):
    a = np.ones((3, 4), np.float32)
    scale = value if kind == "number" else np.array([1.0, value, 2.0], np.float32)
    with pytest.raises(ValueError, match="scale_a.* not finite"):
        opencl_engine.matmul(a, a.T, scale_a=scale)


def test_an_int8_c_with_float_operands_is_added(opencl_engine, rng):
    a, b = random(rng, (6, 5), "float32"), random(rng, (5, 4), "float32")
    c = rng.integers(-100, 100, (6, 4)).astype(np.int8)
    got = opencl_engine.matmul(a, b, c=c)
    assert got.dtype == np.float32
    assert rel_error(got, reference(a, b) + c) < 2e-5
