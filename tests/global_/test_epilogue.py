"""Fused epilogue: act(alpha * (a @ b) + beta * c + bias) against the unfused float64 computation.

Every option alone and combined, every activation, every float dtype, broadcast forms of c, both
bias axes, out_dtype, out=, K = 0, 1-D operands and bad input, on every available backend. CUDA
sources with every epilogue term are compile-checked with nvcc for all the CUDA algorithms.
"""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, element_type
from gemm_engine.errors import SetupError
from gemm_engine.call.numpy_rules import call_shape
from gemm_engine.views import c_view
from gemm_engine.epilogue.activations import ACTIVATIONS, Activation, register_activation
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import MatmulProblem

from cuda_compile import ARCHS, compile_jobs, failures_of, nvcc_or_skip, prefetched
from helpers import DTYPES, TOLERANCE, np_dtype, random, rel_error

OPENCL_ALGORITHMS = ["simple_unit", "double_buffering_unit", "specialized_unit", "ordered_unit"]
#: The elementwise activations (gated ones pair columns: tests/global_/test_pairs.py).
ELEMENTWISE = sorted(name for name, cls in ACTIVATIONS.items() if cls.arity == 1)


def unfused(a, b, *, alpha=1.0, beta=None, c=None, bias=None, bias_axis=-1, activation=None):
    """The same computation as separate numpy steps, in float64."""
    x = alpha * np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    if c is not None:
        x = x + (1.0 if beta is None else beta) * np.asarray(c, np.float64)
    if bias is not None:
        v = np.asarray(bias, np.float64)
        x = x + (v if bias_axis in (-1, 1) else v[:, None])
    if activation is not None:
        x = (activation if isinstance(activation, Activation) else ACTIVATIONS[activation]()).reference(x)
    return x


def poisoned(shape, dtype):
    out = np.empty(shape, np_dtype(dtype))
    out[...] = np.nan
    return out


def check(engine, rng, dtype, shape_a, shape_b, tol_dtype=None, **opts):
    a, b = random(rng, shape_a, dtype), random(rng, shape_b, dtype)
    for key in ("c", "bias"):
        if isinstance(opts.get(key), tuple):
            opts[key] = random(rng, opts[key], dtype)
    result = engine.matmul(a, b, **opts)
    ref = unfused(a, b, **{k: v for k, v in opts.items() if k not in ("algorithm", "out", "out_dtype")})
    err = rel_error(result, ref)
    tol = TOLERANCE[tol_dtype or dtype]
    assert err <= tol, f"relative error {err:.2e} > {tol:.1e}"
    return result


@pytest.mark.parametrize("activation", [None] + ELEMENTWISE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_everything_at_once(engine, rng, dtype, activation):
    check(engine, rng, dtype, (2, 37, 19), (19, 45), alpha=0.75, beta=-1.25, c=(2, 37, 45),
          bias=(45,), activation=activation)


OPTION_SETS = {
    "alpha": dict(alpha=-2.5),
    "c": dict(c=(37, 45)),
    "beta_c": dict(beta=0.5, c=(37, 45)),
    "bias_cols": dict(bias=(45,)),
    "bias_rows": dict(bias=(37,), bias_axis=0),
    "relu": dict(activation="relu"),
    "alpha_bias_relu": dict(alpha=3.0, bias=(45,), activation="relu"),
    "c_bias_rows_silu": dict(c=(37, 45), bias=(37,), bias_axis=-2, activation="silu"),
}


@pytest.mark.parametrize("options", sorted(OPTION_SETS))
def test_each_option(engine, rng, options):
    check(engine, rng, "float32", (37, 19), (19, 45), **dict(OPTION_SETS[options]))


@pytest.mark.parametrize("c_shape", [(45,), (1, 45), (37, 1), (1, 1), (3, 1, 45), (3, 37, 45), (1, 37, 45)])
def test_c_broadcasts(engine, rng, c_shape):
    check(engine, rng, "float32", (3, 37, 19), (19, 45), beta=1.5, c=c_shape)


def test_c_transposed_and_strided_views(engine, rng):
    a, b = random(rng, (37, 19), "float32"), random(rng, (19, 45), "float32")
    c_t = random(rng, (45, 37), "float32").T            # column-major c, read in place
    c_s = random(rng, (37, 90), "float32")[:, ::2]      # every other column
    for c in (c_t, c_s):
        ref = unfused(a, b, c=c)
        assert rel_error(engine.matmul(a, b, c=c), ref) <= TOLERANCE["float32"]


def test_c_broadcast_is_read_in_place_with_stride_zero():
    shape = call_shape((4, 37, 19), (19, 45))
    bias_like = np.zeros(45, np.float32)
    view = c_view(bias_like.shape, bias_like.strides, 4, shape)
    assert (view.row_stride, view.col_stride, view.batch_stride) == (0, 1, 0)
    per_row = np.zeros((4, 37, 1), np.float32)
    view = c_view(per_row.shape, per_row.strides, 4, shape)
    assert (view.row_stride, view.col_stride, view.batch_stride) == (1, 0, 37)
    # Two batch axes broadcast one way each: no single batch stride, so c is copied.
    two = call_shape((2, 3, 4, 5), (5, 6))
    odd = np.zeros((2, 1, 4, 6), np.float32)
    assert c_view(odd.shape, odd.strides, 4, two) is None


@pytest.mark.parametrize("algorithm", OPENCL_ALGORITHMS)
def test_algorithms_apply_the_epilogue(engine, rng, algorithm):
    try:
        check(engine, rng, "float32", (2, 33, 70), (70, 29), algorithm=algorithm, alpha=0.5, c=(33, 29),
              bias=(29,), activation="gelu_tanh")
    except SetupError as exc:
        pytest.skip(f"{algorithm} refuses this problem here: {exc}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_out_dtype_float32_from_half(engine, rng, dtype):
    if dtype not in DTYPES:
        pytest.skip("bfloat16 needs ml_dtypes")
    result = check(engine, rng, dtype, (37, 64), (64, 45), out_dtype=np.float32, bias=(45,), activation="relu")
    assert result.dtype == np.float32


def test_out_dtype_narrows_and_widens(engine, rng):
    r16 = check(engine, rng, "float32", (37, 19), (19, 45), tol_dtype="float16", out_dtype=np.float16)
    assert r16.dtype == np.float16
    r64 = check(engine, rng, "float32", (37, 19), (19, 45), out_dtype=np.float64)
    assert r64.dtype == np.float64


def test_result_dtype_promotes_with_c_and_bias(engine, rng):
    a, b = random(rng, (8, 16), "float16"), random(rng, (16, 8), "float16")
    bias = random(rng, (8,), "float32")
    assert engine.matmul(a, b, bias=bias).dtype == np.float32
    assert engine.matmul(a, b, bias=bias.astype(np.float16)).dtype == np.float16


def test_out_is_written_in_full(engine, rng):
    a, b = random(rng, (2, 37, 19), "float32"), random(rng, (19, 45), "float32")
    bias = random(rng, (45,), "float32")
    out = poisoned((2, 37, 45), "float32")
    result = engine.matmul(a, b, bias=bias, activation="tanh", out=out)
    assert result is out
    assert rel_error(out, unfused(a, b, bias=bias, activation="tanh")) <= TOLERANCE["float32"]


def test_in_place_accumulate_into_c(engine, rng):
    """out=c: C <- a @ b + C, as BLAS allows."""
    a, b = random(rng, (37, 19), "float32"), random(rng, (19, 45), "float32")
    c = random(rng, (37, 45), "float32")
    ref = unfused(a, b, c=c, beta=2.0)
    engine.matmul(a, b, c=c, beta=2.0, out=c)
    assert rel_error(c, ref) <= TOLERANCE["float32"]


def test_beta_zero_does_not_read_c(engine, rng):
    a, b = random(rng, (5, 7), "float32"), random(rng, (7, 3), "float32")
    c = np.full((5, 3), np.nan, np.float32)
    assert rel_error(engine.matmul(a, b, c=c, beta=0.0), unfused(a, b)) <= TOLERANCE["float32"]


def test_vector_operands(engine, rng):
    a, b = random(rng, (19,), "float32"), random(rng, (19, 45), "float32")
    check_ = unfused(a, b, bias=np.arange(45.0), activation="relu")
    assert rel_error(engine.matmul(a, b, bias=np.arange(45.0, dtype=np.float32), activation="relu"),
                     check_) <= TOLERANCE["float32"]
    m = random(rng, (37, 19), "float32")
    v = random(rng, (19,), "float32")
    c = random(rng, (37,), "float32")
    assert rel_error(engine.matmul(m, v, c=c, alpha=2.0), unfused(m, v, c=c, alpha=2.0)) <= TOLERANCE["float32"]


def test_k_zero(engine, rng):
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 6), np.float32)
    bias = random(rng, (6,), "float32")
    c = random(rng, (4, 6), "float32")
    result = engine.matmul(a, b, c=c, beta=-1.0, bias=bias, activation="sigmoid")
    assert rel_error(result, unfused(a, b, c=c, beta=-1.0, bias=bias, activation="sigmoid")) <= 1e-6


def test_device_arrays_take_the_cached_path(engine, rng):
    """Repeated fused calls on device arrays reuse a plan and still see new alpha, beta and data
    (the first call plans, the second packs and prepares the direct launch on CUDA, the later ones
    launch it with only the addresses and epilogue values new)."""
    rt = engine.runtime
    a, b = random(rng, (37, 19), "float32"), random(rng, (19, 45), "float32")
    da, db = rt.to_device(a), rt.to_device(b)
    for alpha, beta in ((1.5, 0.5), (-2.0, 3.0), (0.25, -1.0), (3.0, 0.0)):
        c, bias = random(rng, (37, 45), "float32"), random(rng, (45,), "float32")
        dc, dbias = rt.to_device(c), rt.to_device(bias)
        result = rt.to_host(engine.matmul(da, db, alpha=alpha, beta=beta, c=dc, bias=dbias, activation="silu"))
        ref = unfused(a, b, alpha=alpha, beta=beta, c=c, bias=bias, activation="silu")
        assert rel_error(result, ref) <= TOLERANCE["float32"]


def test_a_new_activation_is_one_class(engine, rng):
    @register_activation
    class Square(Activation):
        name = "test_square"

        def render(self, x, m):
            return f"({x} * {x})"

        def reference(self, x):
            return x * x

    try:
        check(engine, rng, "float32", (9, 11), (11, 13), activation="test_square", bias=(13,))
        check(engine, rng, "float64", (9, 11), (11, 13), activation=Square())
    finally:
        ACTIVATIONS.pop("test_square")


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(beta=2.0), ValueError, "beta"),
    (dict(bias=np.zeros(4, np.float32)), ValueError, "bias"),
    (dict(bias=np.zeros(5, np.float32), bias_axis=1), ValueError, "bias"),
    (dict(bias=np.zeros(6, np.float32), bias_axis=2), ValueError, "bias_axis"),
    (dict(c=np.zeros((6, 5), np.float32)), ValueError, "c of shape"),
    (dict(activation="swish"), ValueError, "activation"),
    (dict(alpha="2"), TypeError, "alpha"),
    (dict(out_dtype=np.int16), TypeError, "int16"),
])
def test_bad_options_are_refused_before_launch(engine, kwargs, error, words):
    a, b = np.ones((5, 3), np.float32), np.ones((3, 6), np.float32)
    out = np.full((5, 6), 7.0, np.float32)
    with pytest.raises(error, match=words):
        engine.matmul(a, b, out=out, **kwargs)
    assert np.all(out == 7.0), "nothing may be written into out before the error"


# -- CUDA sources: every epilogue term through every CUDA algorithm's writer, compiled by nvcc ------

def _fused_problems():
    full = Epilogue(scaled=True, c=FLOAT32, bias=FLOAT16, bias_axis=0, activation=ACTIVATIONS["gelu"]())
    # Unaligned sizes: the guarded stores and (f16 out) the paired half stores both render.
    for dtype, out in (("float16", "float16"), ("bfloat16", "float32"), ("float64", "float64")):
        et = element_type(np_dtype(dtype))
        ep = full if et.compute == "f32" else Epilogue(c=FLOAT32, activation=ACTIVATIONS["silu"](), compute="f64")
        yield MatmulProblem(1, 77, 61, 45, et, et, element_type(np_dtype(out)), lhs_align=8, rhs_align=8,
                            epilogue=ep)


def fused_jobs() -> list:
    jobs = {}   # deduplicated: families render their members' sources
    for name, cls in sorted(REGISTRY.items()):
        for cc in ((8, 0), (9, 0)):
            d = dialect_for(nominal_cuda_device(*cc))
            arch = ARCHS[0] if cc == (8, 0) else ARCHS[1]
            alg = cls()
            for p in _fused_problems():
                try:
                    cfg = alg.setup(p, d)
                except SetupError:
                    continue
                src = alg.render(cfg, d)
                assert "ge_epilogue(" in src, f"{name}: the epilogue did not reach the store"
                jobs.setdefault((src, arch), f"{name} {p.lhs.name} sm_{cc[0]}{cc[1]}")
    return [(name, src, arch) for (src, arch), name in jobs.items()]


@pytest.mark.nvcc
@prefetched(fused_jobs)
def test_fused_cuda_sources_compile():
    nvcc = nvcc_or_skip()
    if "bfloat16" not in DTYPES:
        pytest.skip("bfloat16 needs ml_dtypes")
    jobs = fused_jobs()
    assert any(arch == ARCHS[1] for *_, arch in jobs), "no CUDA algorithm set up a fused problem"
    failures = failures_of(compile_jobs(jobs, nvcc))
    assert not failures, "\n\n".join(f"{k}:\n{v[-4000:]}" for k, v in list(failures.items())[:2])


def test_integer_products_take_no_epilogue(engine):
    a = np.ones((3, 4), np.int8)
    with pytest.raises(TypeError, match="floating-point"):
        engine.matmul(a, a.T, bias=np.ones(3, np.float32))
    with pytest.raises(TypeError, match="floating-point"):
        engine.matmul(a, a.T, activation="relu")


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_activations_saturate_on_every_backend(engine, name):
    """Large and huge arguments of either sign (x @ I = x): the kernel's value equals the float64
    reference within float32 rounding, nowhere a finite garbage like gelu_tanh(-1e30) = -3e22."""
    x = np.array([[-1e30, -1e4, -30.0, -3.0, -1e-3, 0.0, 1e-3, 3.0, 30.0, 1e4, 1e30]], np.float32)
    got = np.asarray(engine.matmul(x.T, np.ones((1, 1), np.float32), activation=name), np.float64).ravel()
    want = ACTIVATIONS[name]().reference(x.astype(np.float64).ravel())
    assert np.all(np.isfinite(got) == np.isfinite(want)), (got, want)
    ok = np.isclose(got, want, rtol=2e-6, atol=1e-30) | (np.abs(got - want) <= 2e-6 * np.abs(x.ravel()))
    assert ok.all(), (name, x.ravel()[~ok], got[~ok], want[~ok])
