"""Gated epilogues (SwiGLU...): each result from the column pair (2j, 2j + 1) of one unit's accumulators.

Against float64 numpy: every OpenCL algorithm, forward (half the columns) and derivative (both
columns, times mul), float32 and float64, shapes off every tile boundary, broadcast batches, bias
on either axis, alpha and K = 0. Every CUDA algorithm's paired sources compile with nvcc for sm_80
and sm_90a, or the algorithm refuses the problem naming why; the compositions that cannot pair
(split-K's reduction, the skinny level, TMA stores of two results a pair or in parts, odd tile
widths) are refused by name; one result a pair is staged for TMA stores at half the width.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import gemm_engine
from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, element_type
from gemm_engine.epilogue.activations import ACTIVATIONS, Derivative
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.global_.write.pairs import split_offset
from gemm_engine.problem import MatmulProblem

from cuda_compile import ARCHS, compile_jobs, failures_of, nvcc_or_skip, prefetched
from helpers import np_dtype, random, rel_error

OPENCL_ALGORITHMS = ["simple_unit", "double_buffering_unit", "specialized_unit", "ordered_unit"]
GATED = sorted(name for name, cls in ACTIVATIONS.items() if cls.arity == 2)


def pre_activation(a, b, alpha=1.0, bias=None, bias_axis=-1):
    z = alpha * np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    if bias is not None:
        v = np.asarray(bias, np.float64)
        z = z + (v if bias_axis in (-1, 1) else v[:, None])
    return z


@pytest.mark.parametrize("expr, expected", [
    ("plane_n0 + 8 + ((lane & 3) << 1)", (("((lane & 3) << 1)", "plane_n0"), 8)),
    ("plane_n0 + 8 + ((lane & 3) << 1) + 1", (("((lane & 3) << 1)", "plane_n0"), 9)),
    ("((LANE & 1) * 8 + 3)", (("(LANE & 1) * 8",), 3)),
    ("part_n0 + 4 + 1", (("part_n0",), 5)),
    ("n0 - 1", (("n0 - 1",), None)),
])
def test_column_expressions_split_into_symbols_and_offset(expr, expected):
    assert split_offset(expr) == expected


@pytest.mark.parametrize("algorithm", OPENCL_ALGORITHMS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_forward_and_derivative_on_every_opencl_algorithm(opencl_engine, rng, algorithm, dtype):
    if dtype == "float64" and not opencl_engine.device.fp64:
        pytest.skip("no fp64 on this OpenCL device")
    a, b = random(rng, (2, 37, 19), dtype), random(rng, (19, 70), dtype)   # 70: off every stage width
    bias = random(rng, (70,), dtype)
    z = pre_activation(a, b, -0.5, bias)
    tol = 2e-5 if dtype == "float32" else 1e-12
    got = opencl_engine.matmul(a, b, alpha=-0.5, bias=bias, activation="swiglu", algorithm=algorithm)
    assert got.shape == (2, 37, 35) and got.dtype == np_dtype(dtype)
    assert rel_error(got, ACTIVATIONS["swiglu"]().reference(z)) <= tol
    dy = random(rng, (37, 35), dtype)                 # broadcasts over the batch
    got = opencl_engine.matmul(a, b, alpha=-0.5, bias=bias, activation=Derivative("swiglu"), mul=dy,
                               algorithm=algorithm)
    assert got.shape == (2, 37, 70)
    want = Derivative("swiglu").reference(z) * np.repeat(np.broadcast_to(dy, (2, 37, 35)), 2, axis=-1)
    assert rel_error(got, want) <= tol


@pytest.mark.parametrize("name", GATED)
def test_every_gated_activation_and_bias_over_rows(opencl_engine, rng, name):
    a, b = random(rng, (23, 11), "float64"), random(rng, (11, 18), "float64")
    bias = random(rng, (23,), "float64")
    got = opencl_engine.matmul(a, b, bias=bias, bias_axis=0, activation=name)
    assert rel_error(got, ACTIVATIONS[name]().reference(pre_activation(a, b, bias=bias, bias_axis=0))) <= 1e-12


def test_one_row_and_k_zero(opencl_engine, rng):
    a, b = random(rng, (9,), "float32"), random(rng, (9, 12), "float32")
    got = opencl_engine.matmul(a, b, activation="swiglu")
    assert got.shape == (6,)
    assert rel_error(got, ACTIVATIONS["swiglu"]().reference(pre_activation(a, b))) <= 2e-5
    bias, mul = random(rng, (12,), "float64"), random(rng, (4, 6), "float64")
    got = opencl_engine.matmul(np.ones((4, 0)), np.ones((0, 12)), bias=bias, activation="swiglu", mul=mul)
    assert np.allclose(got, ACTIVATIONS["swiglu"]().reference(np.broadcast_to(bias, (4, 12))) * mul, rtol=1e-12)


@pytest.mark.parametrize("kwargs, words", [
    (dict(b=np.ones((3, 7))), "even number of columns"),
    (dict(c=np.ones((5, 3))), "c is not supported with the gated"),
    (dict(mul=np.ones((5, 6))), "mul of shape"),
])
def test_call_errors_name_the_argument(opencl_engine, kwargs, words):
    b = kwargs.pop("b", np.ones((3, 6)))
    with pytest.raises(ValueError, match=words):
        opencl_engine.matmul(np.ones((5, 3)), b, activation="swiglu", **kwargs)


def _problem(dtype="float16", out="float16", m=77, n=62, k=45, activation="swiglu", mul=None, bias=FLOAT16):
    et = element_type(np_dtype(dtype))
    act = ACTIVATIONS[activation]() if isinstance(activation, str) else activation
    return MatmulProblem(1, m, n, k, et, et, element_type(np_dtype(out)), lhs_align=8, rhs_align=8,
                         epilogue=Epilogue(bias=bias, activation=act, mul=mul, scaled=True))


def _cuda_problems():
    yield _problem()
    yield _problem("bfloat16", "float32", activation=Derivative("swiglu"), mul=BFLOAT16)
    yield _problem("float32", "float32", activation="geglu", bias=FLOAT32)
    yield _problem("float64", "float64", activation=Derivative("reglu"), mul=FLOAT32, bias=None)
    yield _problem(m=1, n=4096, k=512)
    yield _problem("bfloat16", "bfloat16", m=300, n=1000, k=256)     # staged through TMA on sm_90a


#: The algorithms that set up at least one of the problems (paired_jobs fills it).
SET_UP: set = set()


def paired_jobs() -> list:
    jobs = {}
    for name, cls in sorted(REGISTRY.items()):
        for cc, arch in (((8, 0), ARCHS[0]), ((9, 0), ARCHS[1])):
            d = dialect_for(nominal_cuda_device(*cc))
            alg = cls()
            for p in _cuda_problems():
                try:
                    cfg = alg.setup(p, d)
                except SetupError as exc:
                    assert not exc.internal, f"{name}: a component raised instead of refusing: {exc}"
                    continue
                SET_UP.add(name)
                src = alg.render(cfg, d)
                assert "ge_epilogue_pair0(" in src, f"{name}: the paired epilogue did not reach the stores"
                jobs.setdefault((src, arch), f"{name} {p.lhs.name} {p.epilogue.activation!r} sm_{cc[0]}{cc[1]}")
    return [(name, src, arch) for (src, arch), name in jobs.items()]


@pytest.mark.nvcc
@prefetched(paired_jobs)
def test_paired_cuda_sources_compile_or_are_refused():
    nvcc = nvcc_or_skip()
    jobs = paired_jobs()
    for name in ("pipelined_mma", "pipelined_wgmma", "specialized_wgmma", "simple_wmma", "pipelined_dmma",
                 "simple_unit"):
        assert name in SET_UP, f"{name} sets up no paired problem"
    failures = failures_of(compile_jobs(jobs, nvcc))
    assert not failures, "\n\n".join(f"{k}:\n{v[-4000:]}" for k, v in list(failures.items())[:2])


@pytest.mark.parametrize("name, words", [
    ("split_k_unit", "applies the epilogue per element"),
    ("skinny", "stores element by element"),
])
def test_compositions_that_cannot_pair_are_refused(name, words):
    d = dialect_for(nominal_cuda_device(9, 0))
    problem = _problem("float32", "float32", m=1 if name == "skinny" else 64, n=64, k=8192, bias=None)
    with pytest.raises(SetupError, match=words):
        REGISTRY[name]().setup(problem, d)


def test_tma_stores_stage_one_result_a_pair_and_refuse_the_rest():
    d = dialect_for(nominal_cuda_device(9, 0))
    big = _problem("bfloat16", "bfloat16", m=4096, n=4096, k=4096, bias=None)
    cfg = REGISTRY["specialized_wgmma"](tma_store=True, stages=3).setup(big, d)
    g = cfg.batch.global_
    level = REGISTRY["specialized_wgmma"]().components.global_
    assert g.writer.tma_store and level.writer.stages_pairs(g)
    assert g.staging == g.stage.stage_m * g.stage.stage_n // 2 * 2          # half the tile's columns
    spec = level.writer.tensor_map_spec(g, 4096, 4096, 2048, 0, 1)
    assert spec.dims[0] == 2048                                              # the half-width output
    source = REGISTRY["specialized_wgmma"](tma_store=True, stages=3).render(cfg, d)
    assert "(cube_n0 >> 1)" in source and "ptx_tma_store_3d(&out_map" in source
    assert REGISTRY["specialized_wgmma"]().setup(big, d).batch.global_.writer.tma_store     # the default
    with pytest.raises(SetupError, match="store_parts=1"):
        REGISTRY["specialized_wgmma"](tma_store=True, store_parts=2, stages=3).setup(big, d)
    derivative = _problem("bfloat16", "float32", m=4096, n=4096, k=4096, activation=Derivative("swiglu"),
                          mul=BFLOAT16, bias=None)
    with pytest.raises(SetupError, match="one result a pair"):
        REGISTRY["specialized_wgmma"](tma_store=True, stages=3).setup(derivative, d)
    odd = replace(_problem("float32", "float32", m=64, n=64, k=64, bias=None))
    with pytest.raises(SetupError, match="even tile width"):
        gemm_engine.algorithms.REGISTRY["simple_unit"](tile_n=1, stage_n=16).setup(odd, dialect_for(
            nominal_cuda_device(8, 0)))


STAGED_CASES = [  # (batch, m, n, k, out dtype, bias axis): tile edges, ragged halves, bands, batch
    (1, 300, 1000, 256, "bfloat16", -1),
    (1, 129, 512, 64, "float16", -1),
    (2, 65, 258, 72, "bfloat16", 0),
    (1, 1024, 2 * 700, 512, "bfloat16", None),
]


@pytest.mark.cuda
@pytest.mark.parametrize("case", STAGED_CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-bias{c[5]}")
def test_staged_pairs_against_float64_on_hopper(rng, case):
    from helpers import cuda_engine_or_skip
    engine, cp = cuda_engine_or_skip((9, 0), "sm_90")
    batch, m, n, k, dtype, axis = case
    a = random(rng, (batch, m, k) if batch > 1 else (m, k), dtype)
    b = random(rng, (k, n), dtype)
    bias = None if axis is None else random(rng, (m if axis == 0 else n,), dtype)
    z = pre_activation(a, b, 0.5, bias, -1 if axis is None else axis)
    want = ACTIVATIONS["swiglu"]().reference(z)
    alg = REGISTRY["specialized_wgmma"](tma_store=True)
    kw = dict(alpha=0.5, activation="swiglu", algorithm=alg, **({} if axis is None else dict(bias=cp.asarray(bias),
                                                                                               bias_axis=axis)))
    out = cp.full(want.shape, np.nan, dtype=np_dtype(dtype))
    engine.matmul(cp.asarray(a), cp.asarray(b), out=out, **kw)
    assert engine.last_choice[1].batch.global_.writer.tma_store
    assert rel_error(cp.asnumpy(out), want) < 1e-2
    # An output the tensor map cannot address (odd element offset): the direct paired stores.
    wide = cp.full(want.shape[:-1] + (want.shape[-1] + 1,), np.nan, dtype=np_dtype(dtype))
    engine.matmul(cp.asarray(a), cp.asarray(b), out=wide[..., 1:], **kw)
    assert rel_error(cp.asnumpy(wide[..., 1:]), want) < 1e-2 and np.isnan(cp.asnumpy(wide[..., 0])).all()
