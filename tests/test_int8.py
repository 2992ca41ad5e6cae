"""int8 x int8 -> int32 through the public API: exact, on every backend, numpy and device arrays.

The contract (a GEMM library's, not numpy's): int8 @ int8 accumulates in 32-bit integers and
returns int32, exactly ``np.matmul(a.astype(np.int64), b.astype(np.int64))`` while that fits int32
(any data with K < 2**17). int8 with a float operand follows numpy's promotion; other integer
dtypes are refused with a TypeError naming the supported ones. The CUDA kernels that int8 sets up
(register FMA and, on sm_80+, mma.sync s8) are compile-checked with nvcc here too.
"""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from cases import LAYOUTS
from cuda_compile import archs_for, compile_all, jobs_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY, AlgorithmFamily
from gemm_engine.batch.base import KERNEL_NAME
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import INT8, INT32, SUPPORTED_NAMES
from gemm_engine.call.numpy_rules import operand_dtypes
from gemm_engine.errors import SetupError
from gemm_engine.call.numpy_rules import result_dtype
from gemm_engine.problem import Layout, MatmulProblem
from device_runs import (SENTINEL, assert_exact, device_operand, exact, int8_must_run, operands,  # noqa: F401
                         random_int8, run_device_int8)
from renders import sources_for

#: (batch, m, n, k): ones, primes, stage (64 x 64 x 16 on OpenCL) +- 1, several cubes and K stages,
#: 1 x N, M x 1, K = 1, a long K, batches.
SHAPES = [
    (1, 1, 1, 1),
    (1, 13, 17, 19),
    (1, 63, 65, 17),
    (1, 64, 64, 32),
    (1, 129, 67, 45),
    (1, 1, 70, 40),
    (1, 70, 1, 40),
    (1, 50, 60, 1),
    (1, 9, 7, 1000),
    (3, 33, 47, 29),
]


# -- numerics ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_numpy_arrays_exact(engine, rng, shape):
    a, b = operands(rng, shape)
    result = engine.matmul(a, b)
    assert isinstance(result, np.ndarray)
    assert_exact(result, a, b)


@pytest.mark.parametrize("layouts", LAYOUTS, ids="-".join)
@pytest.mark.parametrize("shape", [SHAPES[2], SHAPES[4], SHAPES[9]], ids=lambda s: "x".join(map(str, s)))
def test_device_arrays_layouts_exact(engine, rng, shape, layouts):
    a, b = operands(rng, shape)
    assert_exact(run_device_int8(engine, a, b, layouts), a, b)


def test_transposed_numpy_views(engine, rng):
    # Column-major operands read in place (a transposed view is not copied).
    a, b = random_int8(rng, (45, 129)).T, random_int8(rng, (67, 45)).T
    assert_exact(engine.matmul(a, b), a, b)


def test_extreme_values_long_k(engine):
    # Every product is (-128) * (-128) = 2**14: K = 4096 sums to 2**26, far past float32's exact
    # integers (2**24), so a float accumulator would be caught; -128 * 127 on the other row.
    k = 4096
    a = np.full((2, k), -128, np.int8)
    b = np.stack([np.full(k, -128, np.int8), np.full(k, 127, np.int8)], axis=1)
    a[1, ::2] = 127
    result = engine.matmul(a, b)
    assert_exact(result, a, b)
    assert result[0, 0] == 2 ** 26


def test_odd_sums_beyond_float32(engine, rng):
    # Sums just above 2**24 with odd values: float32 accumulation would round them.
    a = np.full((3, 2049), 127, np.int8)
    b = np.full((2049, 5), 127, np.int8)
    b[0, :] = rng.integers(-128, 128, 5, dtype=np.int8) | 1
    assert_exact(engine.matmul(a, b), a, b)


def test_batch_broadcast_and_vectors(engine, rng):
    a, b = random_int8(rng, (2, 1, 5, 7)), random_int8(rng, (3, 7, 4))
    assert_exact(engine.matmul(a, b), a, b)
    v, w = random_int8(rng, (7,)), random_int8(rng, (7,))
    result = engine.matmul(v, w)
    assert np.ndim(result) == 0 and np.asarray(result).dtype == np.int32
    assert result == int(np.dot(v.astype(np.int64), w.astype(np.int64)))
    m = random_int8(rng, (5, 7))
    assert_exact(engine.matmul(m, w), m, w)


def test_k_zero_gives_int32_zeros(engine):
    result = engine.matmul(np.ones((3, 0), np.int8), np.ones((0, 4), np.int8))
    assert result.dtype == np.int32 and result.shape == (3, 4) and not result.any()


# -- out= --------------------------------------------------------------------------------------------
def test_out_int32_numpy_poisoned(engine, rng):
    a, b = operands(rng, (1, 65, 63, 33))
    out = np.full((65, 63), SENTINEL, np.int32)
    assert engine.matmul(a, b, out=out) is out
    assert_exact(out, a, b)


def test_out_int64_same_kind(engine, rng):
    a, b = operands(rng, (2, 9, 11, 300))
    out = np.full((2, 9, 11), SENTINEL, np.int64)
    assert engine.matmul(a, b, out=out) is out
    np.testing.assert_array_equal(out, exact(a, b))


def test_out_int64_device(engine, rng):
    a, b = operands(rng, (1, 17, 19, 23))
    rt = engine.runtime
    out = rt.to_device(np.full((17, 19), SENTINEL, np.int64))
    assert engine.matmul(rt.to_device(a), rt.to_device(b), out=out) is out
    np.testing.assert_array_equal(rt.to_host(out), exact(a, b))


def test_out_narrower_or_unsigned(engine, rng):
    # int32 -> int8 is a same-kind cast numpy allows (the values wrap); int32 -> uint8 is not.
    a, b = operands(rng, (1, 4, 5, 6))
    out = np.zeros((4, 5), np.int8)
    engine.matmul(a, b, out=out)
    np.testing.assert_array_equal(out, exact(a, b).astype(np.int8))
    with pytest.raises(TypeError, match="same_kind"):
        engine.matmul(a, b, out=np.zeros((4, 5), np.uint8))   # signed -> unsigned is not same_kind


# -- dtypes ------------------------------------------------------------------------------------------
def test_result_dtype_rule():
    assert result_dtype(np.dtype(np.int8), np.dtype(np.int8)) == np.int32
    assert result_dtype(np.int8, np.int8) == np.int32          # scalar types, not dtypes
    assert result_dtype("int8", "int8") == np.int32
    assert result_dtype(np.int8, np.float32) == np.float32     # numpy's promotion with a float
    assert result_dtype(np.float16, np.int8) == np.float16
    assert operand_dtypes(np.int8, np.int8, np.dtype(np.int32)) == (np.int8, np.int8)
    assert operand_dtypes(np.int8, np.float32, np.dtype(np.float32)) == (np.float32, np.float32)
    assert "int8" in SUPPORTED_NAMES and "int32" not in SUPPORTED_NAMES


def test_int8_with_float_follows_numpy(engine, rng):
    a = random_int8(rng, (6, 9))
    for dt in (np.float32, np.float16, np.float64):
        b = rng.standard_normal((9, 4)).astype(dt)
        result = engine.matmul(a, b)
        assert result.dtype == np.result_type(np.int8, dt)
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(result.astype(np.float64), ref, rtol=2e-2 if dt == np.float16 else 1e-5,
                                   atol=0.5 if dt == np.float16 else 1e-4)


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64, np.uint8, np.uint16, np.bool_])
def test_other_integer_dtypes_refused(engine, dtype):
    a = np.ones((3, 3), dtype)
    for x, y in ((a, a), (a, np.ones((3, 3), np.int8)), (np.ones((3, 3), np.int8), a)):
        with pytest.raises(TypeError, match=np.dtype(dtype).name) as info:
            engine.matmul(x, y)
        assert all(name in str(info.value) for name in ("int8", "float32", "float16"))


# -- every algorithm (run by test_algorithms.py, which crosses them with every dtype) -------------------
def test_mixed_layouts_every_algorithm(engine, rng):
    # test_algorithms.py runs (row, row) and (col, col); here a mixed pair.
    a, b = operands(rng, (2, 129, 67, 45))
    for name in sorted(REGISTRY):
        try:
            result = run_device_int8(engine, a, b, ("col", "row"), algorithm=name)
        except SetupError:
            assert not int8_must_run(name, engine.backend, engine.device), name
            continue
        assert_exact(result, a, b)


# -- CUDA sources --------------------------------------------------------------------------------------
def test_int8_kernels_are_integer_kernels():
    """The int8 kernels accumulate in int (no float zero or float accumulator anywhere) and the
    mma.sync one uses the s8 instruction with s32 accumulators; test_cuda_sources.py compiles them."""
    problem = MatmulProblem(2, 129, 67, 45, INT8, INT8, INT32, Layout.ROW, Layout.ROW, 16, 16)
    seen = set()
    for cc in ((8, 0), (9, 0)):
        dialect = dialect_for(nominal_cuda_device(*cc))
        for name in sorted(REGISTRY):
            alg = REGISTRY[name]()
            try:
                cfg = alg.setup(problem, dialect)
            except SetupError:
                continue
            seen.add(name)
            body = alg.render(cfg, dialect).split(KERNEL_NAME, 1)[1]
            assert "0.0f" not in body and "float" not in body, name
            if "mma.sync" in body:
                assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in body, name
    assert {"simple_unit", "simple_mma", "double_buffering_mma", "auto", "simple"} <= seen, seen
    assert any("int8" in key for key in sources_for("simple_mma", (9, 0))), "no int8 kernel compiled"


def column_major_sources(min_arch: str | None) -> dict:
    # test_cuda_sources.py compiles int8 with both operands row-major; here both column-major
    # (the transposing loads) with no alignment. Algorithms of ``min_arch`` only (sm_90a: wgmma,
    # which no sm_80 pass accepts).
    dialect = dialect_for(nominal_cuda_device(9, 0))
    problems = [MatmulProblem(1, 129, 67, 45, INT8, INT8, INT32, Layout(lhs), Layout(rhs), align, align)
                for lhs, rhs, align in (("col", "col", 1),)]
    sources = {}
    for name, cls in sorted(REGISTRY.items()):
        if issubclass(cls, AlgorithmFamily) or getattr(cls, "min_arch", None) != min_arch:
            continue
        alg = cls()
        for p in problems:
            try:
                cfg = alg.setup(p, dialect)
            except SetupError:
                continue
            sources.setdefault(cfg, (f"{name} {p}", alg.render(cfg, dialect)))
    return dict(sources.values())


@pytest.mark.nvcc
@pytest.mark.parametrize("min_arch", [None, "sm_90a"])
@prefetched(lambda min_arch: jobs_of(column_major_sources(min_arch), archs_for(min_arch)))
def test_int8_column_major_sources_compile(min_arch):
    nvcc = nvcc_or_skip()
    sources = column_major_sources(min_arch)
    if min_arch == "sm_90a":
        assert any(key.startswith("pipelined_wgmma") for key in sources), "no int8 wgmma kernel rendered"
    failures = compile_all(sources, nvcc, archs=archs_for(min_arch))
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])


def test_default_matmul_int8(rng):
    # The module-level API on the default engine (whatever backend it picks here).
    a, b = operands(rng, (1, 20, 30, 40))
    try:
        result = gemm_engine.matmul(a, b)
    except gemm_engine.BackendUnavailableError as exc:
        pytest.skip(f"no default backend here: {exc}")
    assert_exact(result, a, b)
