"""The cp.async rings (`PipelinedGlobalMatmul` and its wgmma subclass) check bounds only in slices
that cross an edge: in the K loop a slice inside K on a cube inside M and N takes unchecked copies,
the others the checked ones.

CPU: the rendered loop's branch and its two sides. CUDA: poisoned outputs at shapes whose every
edge is crossed (K not a whole number of slices, partial cubes along M and N, batch), against
float64 numpy, for the three algorithms on these rings.
"""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.dmma import PipelinedDmmaAlgorithm
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT64
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))
ROW, COL = Layout.ROW, Layout.COL


def _loop_issue(src: str) -> str:
    loop = src[src.index("for (int step = 0"):]
    return loop[loop.index("if (more) {"):loop.index("cp.async.commit_group") if "cp.async.commit_group" in loop
                else loop.index("ptx_cp_async_commit();")]


@pytest.mark.parametrize("shape, conds", [
    ((1, 3000, 3000, 3000), ("k0 + 16 <= K", "cube_m0 + 64 <= M", "cube_n0 + 64 <= N")),
    ((1, 3008, 3008, 3000), ("k0 + 16 <= K",)),
    ((1, 3000, 3000, 3008), ("cube_m0 + 64 <= M", "cube_n0 + 64 <= N")),
])
def test_loop_checks_only_slices_on_an_edge(shape, conds):
    alg = PipelinedDmmaAlgorithm()
    problem = MatmulProblem(*shape, FLOAT64, FLOAT64, FLOAT64, ROW, ROW, 2, 2)
    issue = _loop_issue(alg.render(alg.setup(problem, SM90), SM90))
    branch = issue.index("if (" + " && ".join(conds) + ") {")
    inside, edge = issue[branch:].split("} else {", 1)
    assert "zfill" not in inside and "ptx_cp_async_cg_16(" in inside
    assert "zfill" in edge


def test_no_branch_without_edges():
    alg = PipelinedDmmaAlgorithm()
    problem = MatmulProblem(1, 2048, 2048, 2048, FLOAT64, FLOAT64, FLOAT64, ROW, ROW, 2, 2)
    issue = _loop_issue(alg.render(alg.setup(problem, SM90), SM90))
    assert "} else {" not in issue and "zfill" not in issue


# -- CUDA ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda():
    cp = pytest.importorskip("cupy", reason="the CUDA numerics test needs CuPy")
    from gemm_engine import Engine
    from gemm_engine.codegen.cuda_runtime import cuda_available
    if not cuda_available():
        pytest.skip("CuPy sees no CUDA GPU")
    return Engine("cuda"), cp


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
    db = cp.asarray(np.ascontiguousarray(np.swapaxes(bb, -1, -2))).swapaxes(-1, -2) if col else cp.asarray(bb)
    out_dtype = np.float64 if dtype == np.float64 else np.float32
    out = cp.full(batch + (m, n), np.nan, dtype=out_dtype)
    try:
        engine.matmul(cp.asarray(a), db, out=out, algorithm=alg_cls.name)
    except Exception as exc:  # noqa: BLE001 -- a device without the instruction refuses
        from gemm_engine.errors import SetupError
        if isinstance(exc, SetupError):
            pytest.skip(f"{alg_cls.name} refuses on this device: {exc}")
        raise
    ref = np.matmul(a.astype(np.float64), bb.astype(np.float64))
    got = cp.asnumpy(out)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert np.isfinite(got).all() and err < (1e-13 if dtype == np.float64 else 1e-3), f"{shape}: {err:.2e}"
