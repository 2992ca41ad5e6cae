"""batch/k_major.py: which operands the K-major level copies (only for a tile that reads K-major,
only those in the other layout), the copy's pitch, launches, workspace and signature, and its
transposing copy kernel run alone on PoCL (a unit composition whose tile asks for K-major operands)."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.k_major import KMajorBatchConfig, KMajorBatchMatmul, k_pitch
from gemm_engine.dtypes import FLOAT16, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.register import RegisterTile
from helpers import cl_run


class _KMajorTile(RegisterTile):
    def requires_k_major(self, problem):
        return True


class _KMajorUnit(SimpleUnitAlgorithm):
    """A portable composition under the K-major level: its copy kernels run on PoCL."""
    name = "k_major_unit_test"
    tile = _KMajorTile
    batch = KMajorBatchMatmul


class _PlainUnit(SimpleUnitAlgorithm):
    name = "k_major_plain_test"
    batch = KMajorBatchMatmul


def _p(lhs=Layout.ROW, rhs=Layout.COL, m=37, n=45, k=29, batch=2, et=FLOAT32):
    return MatmulProblem(batch, m, n, k, et, et, et, lhs, rhs)


@pytest.mark.parametrize("k, align, pitch", [(29, 4, 32), (32, 4, 32), (1, 8, 8), (4093, 8, 4096)])
def test_k_pitch(k, align, pitch):
    assert k_pitch(k, align) == pitch


@pytest.mark.parametrize("lhs, rhs, copies", [(Layout.ROW, Layout.COL, ()), (Layout.COL, Layout.COL, ("lhs",)),
                                              (Layout.ROW, Layout.ROW, ("rhs",)),
                                              (Layout.COL, Layout.ROW, ("lhs", "rhs"))])
def test_copies_only_what_the_tile_cannot_read(opencl_engine, lhs, rhs, copies):
    d = opencl_engine.dialect
    alg = _KMajorUnit()
    problem = _p(lhs, rhs)
    cfg = alg.setup(problem, d).batch
    level = alg.build()
    assert (cfg.copies if isinstance(cfg, KMajorBatchConfig) else ()) == copies
    launches = level.launches(cfg, problem)
    assert [l.name for l in launches] == [f"gemm_engine_k_major_{op}" for op in copies] + ["gemm_engine_kernel"]
    ws = level.workspace(cfg, problem)
    if copies:
        rows = sum({"lhs": 37, "rhs": 45}[op] for op in copies)
        assert ws.count == 2 * rows * k_pitch(29, 4) and "workspace" in level.signature(cfg).names
        # The main kernel reads the copies K-major.
        g = cfg.global_
        assert g.lhs_loader.operand.layout is Layout.ROW and g.rhs_loader.operand.layout is Layout.COL
    else:
        assert ws is None and "workspace" not in level.signature(cfg).names
    # A tile that reads any layout: nothing is copied.
    assert not isinstance(_PlainUnit().setup(problem, d).batch, KMajorBatchConfig)


def test_half_precision_pitch_is_eight_elements(opencl_engine):
    cfg = _KMajorUnit().setup(_p(Layout.COL, et=FLOAT16), opencl_engine.dialect).batch
    assert cfg.pitch_align == 8 and cfg.global_.lhs_loader.operand.align == 8


@pytest.mark.xfail(strict=True, reason="the copy kernel returns early (a broadcast operand's later batch entries) "
                                       "before its SYNC_CUBE(); PoCL miscompiles a work-group-uniform return "
                                       "before a barrier: wrong values and writes past the operand's region")
def test_transposing_copy_alone_on_pocl(opencl_engine, rng):
    batch, m, n, k = 1, 37, 45, 29
    problem = _p(rhs=Layout.ROW, m=m, n=n, k=k, batch=batch)
    alg = _KMajorUnit()
    cfg = alg.setup(problem, opencl_engine.dialect)
    source = alg.render(cfg, opencl_engine.dialect)
    b = rng.standard_normal((k, n)).astype(np.float32)
    pitch = k_pitch(k, 4)
    guard = 4096
    ws = np.full(n * pitch + guard, 3.0, np.float32)
    i64 = np.int64
    args = [np.zeros((m, k), np.float32), i64(0), i64(k), i64(0), b, i64(0), i64(n), i64(0),
            np.zeros(m * n, np.float32), i64(0), i64(n), i64(0), i64(m), i64(n), i64(k), i64(batch), ws]
    [launch, _] = alg.launches(cfg, problem)
    got = cl_run(opencl_engine, source, "gemm_engine_k_major_rhs", args, launch.cubes * launch.units,
                 local=launch.units, out=-1)
    assert (got[n * pitch:] == 3.0).all(), "written past the copy's region"
    np.testing.assert_array_equal(got[:n * pitch].reshape(n, pitch)[:, :k], b.T)
