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


# -- derivatives ----------------------------------------------------------------------------------
ELEMENTWISE = sorted(name for name, cls in gemm_engine.ACTIVATIONS.items() if cls.arity == 1)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_each_reference_derivative_is_the_references_slope(name):
    act = gemm_engine.ACTIVATIONS[name]()
    x = np.linspace(-6, 6, 241)
    x = x[np.abs(x) > 1e-3]                  # relu's kink
    h = 1e-6
    slope = (act.reference(x + h) - act.reference(x - h)) / (2 * h)
    assert np.allclose(act.reference_derivative(x), slope, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_derivative_kernels_match_their_reference_even_saturated(engine, name):
    """x @ I through Derivative(f): the kernel's f'(x) equals the float64 reference within float32
    rounding for arguments of every size, finite wherever the reference is."""
    from gemm_engine.epilogue.activations import Derivative
    x = np.array([[-1e30, -1e4, -30.0, -3.0, -1e-3, 0.5, 1e-3, 3.0, 30.0, 1e4, 1e30]], np.float32)
    got = np.asarray(engine.matmul(x.T, np.ones((1, 1), np.float32), activation=Derivative(name)), np.float64).ravel()
    with np.errstate(all="ignore"):
        want = gemm_engine.ACTIVATIONS[name]().reference_derivative(x.astype(np.float64).ravel())
    assert np.all(np.isfinite(got)), (name, got)
    assert np.allclose(got, want, rtol=2e-5, atol=1e-6), (name, got, want)


def test_an_activation_without_a_derivative_is_refused_by_name():
    from gemm_engine.epilogue.activations import Derivative
    assert Affine().has_derivative is False and gemm_engine.ACTIVATIONS["silu"]().has_derivative
    with pytest.raises(ValueError, match="'test_affine' defines no `derivative`"):
        Derivative(Affine())
    assert Derivative("silu") == Derivative("silu") and hash(Derivative("gelu")) == hash(Derivative("gelu"))


# -- fast math where the result is 16 bits -----------------------------------------------------------
def test_cuda_uses_fast_exp_and_division_only_for_16_bit_results():
    """A result rounded to bf16 / f16 takes CUDA's __expf and __fdividef (a few ulp, far under its
    rounding; bench/SELECTION_NOTES.md, "Paired stores"); a float32 result keeps expf and IEEE
    division; OpenCL keeps its exact functions."""
    from dataclasses import replace
    from gemm_engine.epilogue.spec import Epilogue
    from renders import NOMINAL_DEVICES, any_problem, render
    for dtype, fast in (("bfloat16", True), ("float16", True), ("float32", False)):
        for name in ("silu", "sigmoid", "gelu_tanh", "swiglu"):
            ep = Epilogue(activation=gemm_engine.ACTIVATIONS[name]())
            p = replace(any_problem((1, 256, 256, 256), dtype, ("row", "col")), epilogue=ep)
            # split-K: its partials are float32, the sums' store applies the epilogue.
            long_k = replace(any_problem((1, 64, 64, 8192), dtype, ("row", "col")), epilogue=ep)
            cases = [("auto", p)] + ([("split_k", long_k)] if name != "swiglu" else [])   # gated: not split-K's
            for algorithm, problem in cases:
                *_, source = render(problem, NOMINAL_DEVICES["sm_90"], algorithm)
                assert ("__expf(" in source) is fast and ("__fdividef(" in source) is fast, (dtype, name, algorithm)
                assert (" expf(" in source or "(expf(" in source) is not fast, (dtype, name, algorithm)
            *_, source = render(p, NOMINAL_DEVICES["opencl"], "auto")
            assert "__expf" not in source and "__fdividef" not in source


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_16_bit_results_saturate_as_float32_ones(engine, name):
    """f(x) and f'(x) into bfloat16 results (the fast forms on CUDA) equal the float64 reference within
    bf16 rounding for arguments of every size, finite wherever the reference is."""
    from gemm_engine.epilogue.activations import Derivative
    from helpers import BF16
    if BF16 is None:
        pytest.skip("no bfloat16 numpy type here (ml_dtypes)")
    x = np.array([[-1e30, -1e4, -100.0, -88.0, -30.0, -3.0, -1e-3, 0.5, 1e-3, 3.0, 30.0, 88.0, 1e4, 1e30]], np.float32)
    act = gemm_engine.ACTIVATIONS[name]()
    cases = [(act, act.reference)] + ([(Derivative(name), act.reference_derivative)] if act.has_derivative else [])
    for activation, reference in cases:
        xb = x.astype(BF16)
        got = np.asarray(engine.matmul(xb.T, np.ones((1, 1), BF16), activation=activation), np.float64).ravel()
        with np.errstate(all="ignore"):
            want = reference(xb.astype(np.float64).ravel())
        finite = np.isfinite(want)
        assert np.array_equal(np.isfinite(got), finite), (name, activation, got, want)
        assert np.allclose(got[finite], want[finite], rtol=1e-2, atol=1e-6), (name, activation, got, want)
