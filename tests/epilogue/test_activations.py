"""Activations: fields of any kind (a list) key the kernel by value; a user activation without a
numpy reference is told why K = 0 needs one."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from helpers import random, reference, rel_error


class Affine(gemm_engine.Activation):
    name = "test_affine"

    def __init__(self, coefficients=(1.0, 2.0)):
        self.coefficients = list(coefficients)

    def render(self, x, m):
        return f"({m.lit(self.coefficients[0])} * {x} + {m.lit(self.coefficients[1])})"

    def reference(self, x):
        return self.coefficients[0] * x + self.coefficients[1]


def test_a_list_field_is_part_of_the_kernel(opencl_engine, rng):
    a, b = random(rng, (9, 7), "float32"), random(rng, (7, 5), "float32")
    assert Affine() == Affine() and hash(Affine()) == hash(Affine()) and Affine() != Affine((2.0, 0.0))
    assert rel_error(opencl_engine.matmul(a, b, activation=Affine()), reference(a, b) + 2) < 2e-5
    assert rel_error(opencl_engine.matmul(a, b, activation=Affine((2.0, 0.0))), 2 * reference(a, b)) < 2e-5


def test_k_zero_without_a_reference_says_why(opencl_engine):
    class NoReference(gemm_engine.Activation):
        name = "test_no_reference"

        def render(self, x, m):
            return x
    with pytest.raises(NotImplementedError, match="K = 0.*numpy `reference`"):
        opencl_engine.matmul(np.ones((3, 0)), np.ones((0, 3)), activation=NoReference())
