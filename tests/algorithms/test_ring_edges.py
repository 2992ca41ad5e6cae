"""The cp.async rings (`PipelinedGlobalMatmul` and its wgmma subclass) at every edge: poisoned
outputs at shapes whose every edge is crossed (K not a whole number of slices, partial cubes along
M and N, batch, both layouts of b), against float64 numpy, for the three algorithms on these rings
(CUDA; skipped without a GPU).

Checking bounds only in the slices that cross an edge (an unchecked branch for the rest) was built
and measured slower on the H100: f64 3000^3 1279-1290 us against 1119-1121, 2000^3 344-348
against 332-334 (bench/results/h100/float64.md, notes). The edge shapes' loss is the
rows' alignment (a row of 3000 doubles is not a whole number of 128-byte lines), not the checks.
"""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.dmma import PipelinedDmmaAlgorithm
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm
from helpers import cuda_engine_or_skip, device_col_major


# -- CUDA ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda():
    return cuda_engine_or_skip()


CASES = [  # (algorithm, dtype, shape (batch, m, n, k), b column-major)
    (PipelinedDmmaAlgorithm, np.float64, (1, 300, 200, 1000), False),
    (PipelinedDmmaAlgorithm, np.float64, (2, 257, 129, 100), True),
    (PipelinedDmmaAlgorithm, np.float64, (1, 1000, 1000, 1000), False),
    (PipelinedMmaAlgorithm, np.float16, (1, 300, 500, 1000), False),
    (PipelinedMmaAlgorithm, np.float16, (3, 130, 70, 200), True),
    (PipelinedWgmmaAlgorithm, np.float16, (1, 1000, 1000, 1000), False),
    (PipelinedWgmmaAlgorithm, np.float16, (2, 200, 300, 520), True),
]


@pytest.mark.cuda
@pytest.mark.parametrize("alg_cls, dtype, shape, col", CASES,
                         ids=lambda v: getattr(v, "name", None) or ("x".join(map(str, v)) if isinstance(v, tuple) else None))
def test_edges_numerics(cuda, alg_cls, dtype, shape, col):
    engine, cp = cuda
    b, m, n, k = shape
    batch = (b,) if b > 1 else ()
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(batch + (m, k)).astype(dtype)
    bb = rng.standard_normal(batch + (k, n)).astype(dtype)
    db = device_col_major(cp, bb) if col else cp.asarray(bb)
    out_dtype = np.float64 if dtype == np.float64 else np.float32
    out = cp.full(batch + (m, n), np.nan, dtype=out_dtype)
    need = (9, 0) if alg_cls is PipelinedWgmmaAlgorithm else (8, 0)
    if engine.device.compute_capability < need:
        pytest.skip(f"{alg_cls.name} needs sm_{need[0]}{need[1]}; {engine.device.name} is below")
    engine.matmul(cp.asarray(a), db, out=out, algorithm=alg_cls.name)
    ref = np.matmul(a.astype(np.float64), bb.astype(np.float64))
    got = cp.asnumpy(out)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < (1e-13 if dtype == np.float64 else 1e-3), f"{shape}: {err:.2e}"
