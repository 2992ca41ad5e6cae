"""`Engine(max_compute_units=...)` / `DeviceInfo.limited_to`: kernels set up for a capped device keep
to the cap (persistent grids of that many cubes; a reentrant global level's one-cube-per-tile grid
turns persistent), split-K keeps its grid, and the capped device is named apart (tuning keys)."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from cuda_compile import compile_cuda, nvcc_or_skip
from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem
from helpers import assert_close, random

SM90 = nominal_cuda_device(9, 0)
CAPPED = SM90.limited_to(100)


def _f32(m=1000, n=1000, k=64):
    return MatmulProblem(1, m, n, k, FLOAT32, FLOAT32, FLOAT32, Layout.ROW, Layout.ROW, 4, 4)


def test_limited_to_names_and_caps_the_device():
    assert CAPPED.compute_units == 100 and CAPPED.limited and not SM90.limited
    assert CAPPED.name != SM90.name and "100 compute units" in CAPPED.name
    assert SM90.limited_to(None) is SM90
    assert SM90.limited_to(SM90.compute_units) is SM90      # no cap at or above the device's count
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(ValueError, match="max_compute_units"):
            SM90.limited_to(bad)


def test_a_one_cube_per_tile_grid_turns_persistent_with_the_cap():
    alg, p = SimpleUnitAlgorithm(), _f32()
    free = alg.setup(p, dialect_for(SM90))
    capped = alg.setup(p, dialect_for(CAPPED))
    tiles = alg.components.tiles(free.batch, p)
    assert free.batch.persistent_cubes == 0 and alg.cube_count(free, p) == tiles > 100
    assert capped.batch.persistent_cubes == 100 and alg.cube_count(capped, p) == 100
    # A problem of fewer tiles than the cap launches one cube per tile.
    small = _f32(64, 64)
    assert alg.cube_count(alg.setup(small, dialect_for(CAPPED)), small) == alg.cube_count(
        alg.setup(small, dialect_for(SM90)), small)


def test_the_capped_persistent_kernel_compiles():
    nvcc = nvcc_or_skip()
    alg = SimpleUnitAlgorithm()
    d = dialect_for(CAPPED)
    ok, log = compile_cuda(alg.render(alg.setup(_f32(), d), d), nvcc, "-gencode=arch=compute_90,code=sm_90")
    assert ok, log


def test_the_persistent_tma_kernel_takes_the_cap():
    bf16 = BY_NAME["bfloat16"]
    p = MatmulProblem(1, 8192, 4096, 8192, bf16, bf16, bf16, Layout.ROW, Layout.ROW, 8, 8)
    alg = SpecializedWgmmaAlgorithm()
    assert alg.setup(p, dialect_for(SM90)).batch.persistent_cubes == SM90.compute_units
    cfg = alg.setup(p, dialect_for(CAPPED))
    assert cfg.batch.persistent_cubes == 100 and alg.cube_count(cfg, p) == 100


def test_split_k_keeps_one_cube_per_tile_and_k_range():
    alg = REGISTRY["split_k_unit"]()
    p = _f32(64, 64, 8192)
    cfg = alg.setup(p, dialect_for(CAPPED))
    assert cfg.batch.persistent_cubes == 0


def test_an_engine_capped_computes_the_product(opencl_engine):
    engine = gemm_engine.Engine("opencl", max_compute_units=1)
    assert engine.device.compute_units == 1
    if opencl_engine.device.compute_units > 1:
        assert engine.device.limited
    rng = np.random.default_rng(0)
    a, b = random(rng, (130, 70), np.float32), random(rng, (70, 90), np.float32)
    assert_close(engine.matmul(a, b), a, b, "float32")
    with pytest.raises(ValueError, match="max_compute_units"):
        gemm_engine.Engine("opencl", max_compute_units=0)
