"""Split-K: K cut into ranges over more cubes, partials summed in a fixed order by a second kernel.

Checked against float64, against the same engine without split-K, for bitwise determinism across
runs, through the epilogue, with every operand layout and batch, and for the choice ``auto`` makes.
"""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.split_k import SplitKUnitAlgorithm
from gemm_engine.batch.split_k import choose_splits
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem

from cuda_compile import ARCHS, compile_jobs, failures_of, nvcc_or_skip, prefetched
from helpers import DTYPES, TOLERANCE, assert_close, np_dtype, random, rel_error

SMALL = dict(tile_m=2, tile_n=2, stage_m=16, stage_n=16, stage_k=8)


def split(splits: int) -> SplitKUnitAlgorithm:
    """A small tiling with the split count fixed (overrides merged into the algorithm's choice)."""
    return SplitKUnitAlgorithm(**SMALL, split_k=splits)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 16, 16, 512), (1, 37, 45, 1001), (3, 5, 7, 333), (2, 1, 9, 260)])
@pytest.mark.parametrize("splits", [2, 7])
def test_split_k_matches_reference(engine, rng, dtype, shape, splits):
    batch, m, n, k = shape
    a = random(rng, (batch, m, k) if batch > 1 else (m, k), dtype)
    b = random(rng, (k, n), dtype)
    out = np.full(a.shape[:-1] + (n,), np.nan, np_dtype(dtype))
    engine.matmul(a, b, out=out, algorithm=split(splits))
    _, cfg = engine.last_choice
    assert cfg.batch.splits > 1
    assert_close(out, a, b, dtype)


@pytest.mark.parametrize("layouts", ["rr", "rc", "cr", "cc"])
def test_layouts(engine, rng, layouts):
    a = random(rng, (2, 29, 700), "float32")
    b = random(rng, (700, 31), "float32")
    if layouts[0] == "c":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    if layouts[1] == "c":
        b = np.asfortranarray(b)
    assert_close(engine.matmul(a, b, algorithm=split(5)), a, b, "float32")


def test_bitwise_deterministic_and_close_to_unsplit(engine, rng):
    a, b = random(rng, (24, 4099), "float32"), random(rng, (4099, 40), "float32")
    first = engine.matmul(a, b, algorithm=split(9))
    for _ in range(3):
        assert np.array_equal(engine.matmul(a, b, algorithm=split(9)), first), "split-K must give the same bits"
    unsplit = engine.matmul(a, b, algorithm="simple_unit")
    assert rel_error(first, unsplit.astype(np.float64)) <= TOLERANCE["float32"]


def test_epilogue_runs_once_in_the_reduction(engine, rng):
    a, b = random(rng, (2, 21, 900), "float32"), random(rng, (900, 19), "float32")
    c, bias = random(rng, (21, 19), "float32"), random(rng, (19,), "float32")
    result = engine.matmul(a, b, alpha=0.5, c=c, beta=-2.0, bias=bias, activation="gelu",
                           algorithm=split(4), out_dtype=np.float64)
    from gemm_engine.epilogue.activations import Gelu
    ref = Gelu().reference(0.5 * (a.astype(np.float64) @ b) - 2.0 * c + bias)
    assert result.dtype == np.float64
    assert rel_error(result, ref) <= TOLERANCE["float32"]


def test_auto_splits_a_long_k_with_little_output(engine, rng):
    a, b = random(rng, (32, 16384), "float32"), random(rng, (16384, 32), "float32")
    assert_close(engine.matmul(a, b), a, b, "float32")
    alg, cfg = engine.last_choice
    assert alg.name.startswith("split_k"), alg.name
    a, b = random(rng, (64, 64), "float32"), random(rng, (64, 64), "float32")
    engine.matmul(a, b)
    assert not engine.last_choice[0].name.startswith("split_k")


def test_short_k_is_refused(engine, rng):
    a, b = random(rng, (16, 8), "float32"), random(rng, (8, 16), "float32")
    with pytest.raises(SetupError, match="too short"):
        engine.matmul(a, b, algorithm="split_k_unit")


def test_choose_splits_covers_k_with_whole_stages():
    for k in (1000, 4096, 65536, 4097):
        p = MatmulProblem(1, 64, 64, k, FLOAT32, FLOAT32, FLOAT32)
        splits, chunk = choose_splits(p, tiles=1, stage_k=16, compute_units=132)
        assert chunk % 16 == 0 and chunk % 8 == 0
        assert (splits - 1) * chunk < k <= splits * chunk   # every range non-empty
        assert splits >= 2


def split_k_jobs() -> list:
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.dtypes import BFLOAT16, FLOAT16
    from gemm_engine.epilogue.activations import Relu
    from gemm_engine.epilogue.spec import Epilogue

    jobs = {}
    for arch, cc in zip(ARCHS, ((8, 0), (9, 0))):
        d = dialect_for(nominal_cuda_device(*cc))
        for name in ("split_k_unit", "split_k_mma", "split_k_wgmma"):
            for et in (FLOAT16, BFLOAT16, FLOAT32):
                for m, n, k in ((64, 64, 8192), (77, 45, 3001)):
                    p = MatmulProblem(2, m, n, k, et, et, et, lhs_align=8, rhs_align=8,
                                      epilogue=Epilogue(bias=et, activation=Relu()))
                    try:
                        cfg = REGISTRY[name]().setup(p, d)
                    except SetupError:
                        continue
                    jobs.setdefault((REGISTRY[name]().render(cfg, d), arch), f"{name} {et.name} {m}x{n}x{k}")
    return [(name, src, arch) for (src, arch), name in jobs.items()]


@pytest.mark.nvcc
@prefetched(split_k_jobs)
def test_split_k_cuda_sources_compile():
    """The members that only run on a GPU (mma.sync, wgmma) compile for sm_80 / sm_90a, with an
    epilogue in their reduction (the unit member is also run above on every backend)."""
    nvcc = nvcc_or_skip()
    jobs = split_k_jobs()
    compiled = {(name.split()[0], arch) for name, _, arch in jobs}
    assert ("split_k_wgmma", ARCHS[1]) in compiled and ("split_k_mma", ARCHS[0]) in compiled
    failures = failures_of(compile_jobs(jobs, nvcc))
    assert not failures, "\n\n".join(f"{k}:\n{v[-4000:]}" for k, v in list(failures.items())[:2])
