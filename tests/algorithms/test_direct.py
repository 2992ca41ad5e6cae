"""The CPU path (``direct_vector``: vector register tiles reading the operands in place): numerics on
the OpenCL device here (PoCL) over boundary shapes, both lhs layouts, batches, every float dtype it
reads and an epilogue, into poisoned outputs (edge cubes overlap their neighbours: each output must
be written once, by its owner); the structure of its kernels (no shared memory, no barrier, one
vector FMA per accumulator register and k step); its refusals; and that ``auto`` takes it on a CPU
device only."""
from __future__ import annotations

import numpy as np
import pytest

from cases import SHAPES
from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.auto import decide
from gemm_engine.algorithms.direct import DirectVectorAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, bfloat16_dtype
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.rules import RULES
from helpers import TOLERANCE, assert_close, random, rel_error

CPU = dialect_for(nominal_opencl_device("cpu"))


def problem(shape, dtype="float32", lhs="row", rhs="row"):
    et = BY_NAME[dtype]
    return MatmulProblem(*shape, et, et, et, Layout(lhs), Layout(rhs))


def cpu_engine(opencl_engine):
    if opencl_engine.device.vendor != "cpu":
        pytest.skip(f"the OpenCL device here is {opencl_engine.device.name!r}, not a CPU")
    return opencl_engine


#: Boundary shapes the tile (8 x 32, 16-wide vectors) meets: exact tiles, one off each way, a
#: problem of exactly one tile, primes, a batch, K below and off the unroll, N of one vector.
DIRECT_SHAPES = [(1, 64, 64, 64), (1, 65, 63, 61), (1, 8, 32, 4), (1, 97, 61, 53), (3, 33, 47, 29),
                 (1, 40, 100, 3), (2, 9, 16, 130)] + [s for s in SHAPES if min(s[1], s[2]) >= 16]


@pytest.mark.parametrize("shape", DIRECT_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_numerics_into_poisoned_output(opencl_engine, rng, shape, dtype):
    eng = cpu_engine(opencl_engine)
    batch, m, n, k = shape
    np_dtype = bfloat16_dtype() if dtype == "bfloat16" else np.dtype(dtype)
    a = random(rng, (batch, m, k), np_dtype)
    b = random(rng, (batch, k, n), np_dtype)
    rt = eng.runtime
    out = rt.to_device(np.full((batch, m, n), np.nan, np.float32).astype(np_dtype))
    eng.matmul(rt.to_device(a), rt.to_device(b), out=out, algorithm="direct_vector")
    got = rt.to_host(out).astype(np.float64)
    assert np.isfinite(got).all(), "an output was never written"
    assert_close(got, a, b, dtype)


@pytest.mark.parametrize("shape", [(1, 65, 63, 61), (2, 9, 40, 17)], ids=str)
def test_column_major_lhs(opencl_engine, rng, shape):
    eng = cpu_engine(opencl_engine)
    batch, m, n, k = shape
    at = random(rng, (batch, k, m), np.float32)
    b = random(rng, (batch, k, n), np.float32)
    a = np.swapaxes(at, -1, -2)
    got = eng.matmul(a, b, algorithm="direct_vector")
    assert_close(got, a, b, "float32")


def test_epilogue(opencl_engine, rng):
    eng = cpu_engine(opencl_engine)
    a, b = random(rng, (37, 41), np.float32), random(rng, (41, 50), np.float32)
    c, bias = random(rng, (37, 50), np.float32), random(rng, (50,), np.float32)
    got = eng.matmul(a, b, alpha=0.5, beta=2.0, c=c, bias=bias, activation="relu", algorithm="direct_vector")
    want = np.maximum(0.5 * (a.astype(np.float64) @ b) + 2.0 * c + bias, 0)
    assert rel_error(got, want) <= TOLERANCE["float32"]


def test_structure():
    alg = DirectVectorAlgorithm()
    cfg = alg.setup(problem((1, 1000, 1000, 1000)), CPU)
    text = alg.render(cfg, CPU)
    body = text.split("void gemm_engine_kernel(")[1]
    assert "SYNC_CUBE()" not in body and "LOCAL " not in body
    tile = cfg.batch.global_.stage.tile
    last = tile.tile_m * tile.vectors - 1
    assert tile.width == 16 and "vload16(0, &dir_rhs" in text and f"float16 acc[{last + 1}]" in text
    assert text.count(f"acc[{last}] = fma(") == 2     # the unrolled K loop and the remainder's step
    assert f"const i64 dir_m0 = cube_m0 + {tile.tile_m} <= M ? cube_m0 : M - {tile.tile_m};" in text
    assert cfg.units == 1 and cfg.batch.global_.shared_memory_bytes == 0
    assert "row = dispatch_t % cubes_m" in text       # down each column: the rhs panel stays in cache


def test_float64_takes_half_the_width():
    cfg = DirectVectorAlgorithm().setup(problem((1, 256, 256, 256), "float64"), CPU)
    tile = cfg.batch.global_.stage.tile
    assert (tile.width, tile.tile_n) == (8, 16)


@pytest.mark.parametrize("p, dialect, match", [
    (problem((1, 64, 64, 64), rhs="col"), CPU, "rhs along n"),
    (problem((1, 64, 64, 64), "int8"), CPU, "vector tile reads"),
    (problem((1, 64, 8, 64)), CPU, "smaller than the stage"),
    (problem((1, 64, 64, 64)), dialect_for(nominal_cuda_device(9, 0)), "vector types"),
])
def test_refusals(p, dialect, match):
    with pytest.raises(SetupError, match=match):
        DirectVectorAlgorithm().setup(p, dialect)


def test_small_problems_shrink_the_tile():
    cfg = DirectVectorAlgorithm().setup(problem((1, 3, 20, 5)), CPU)
    tile = cfg.batch.global_.stage.tile
    assert (tile.tile_m, tile.tile_n) == (3, 16)


def test_auto_takes_it_on_a_cpu_only():
    members = [REGISTRY[r.algorithm]() for r in RULES]
    for target, want in (("cpu", "direct_vector"), ("gpu", "simple_unit")):
        member, _, _ = decide(members, problem((1, 512, 512, 512)), dialect_for(nominal_opencl_device(target)))
        assert member.name == want
    member, _, verdicts = decide(members, problem((1, 512, 512, 512), rhs="col"), CPU, everything=True)
    assert member.name == "simple_unit"
    assert any(v.name == "direct_vector" and "column-major rhs" in v.reason for v in verdicts)
