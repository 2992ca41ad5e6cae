"""Clusters of two cubes along M on the Hopper Specialized pipeline (``cluster_m=2``): each rhs slot
is shared, half issued by each cube and multicast into both; structure and refusals here, numerics
on an sm_90 GPU."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cuda_compile import archs_for, compile_all, jobs_of, nvcc_or_skip, prefetched
from helpers import assert_close, np_dtype, random
from hopper_support import SM90, padded, problem, setup, sm90_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.tma_persistent import TmaPersistentBatchMatmul
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.tma_loader import TmaLoader


def test_kernel_structure():
    p = problem(m=4096, n=4096, k=4096, layouts=("row", "col"))
    alg, cfg = setup(p, cluster_m=2)
    g = cfg.batch.global_
    rhs, lhs = g.rhs_loader, g.lhs_loader
    # K-major rhs: one 256-line copy a slot, cut into two 128-line boxes, one issued by each cube.
    assert (rhs.shared_by, rhs.line_split, rhs.box, rhs.issued) == (2, 2, (64, 128), 1)
    assert lhs.shared_by == 1 and rhs.slot_bytes == 256 * 128 and g.slot_bytes == (128 + 256) * 128
    src = alg.render(cfg, SM90)
    assert "__cluster_dims__(2, 1, 1)" in src
    assert src.count("ptx_tma_load_3d_multicast(") == 2       # the definition and one copy a slot
    assert src.count("ptx_cluster_sync();") == 2              # after the barriers' init, before leaving
    # Each empty barrier counts both cubes' consumer warpgroups, arriving in both cubes.
    assert src.count(f"{g.consumers * 2});") >= g.stages
    assert src.count("ptx_mbarrier_arrive_remote(") >= 2 * 2
    # One cube per multiprocessor, whole clusters.
    assert alg.cube_count(cfg, p) == 132


def test_mn_major_rhs_shares_whole_copies():
    alg, cfg = setup(problem(m=4096, n=4096, k=4096, layouts=("row", "row")), cluster_m=2)
    rhs = cfg.batch.global_.rhs_loader
    assert (rhs.copies, rhs.line_split, rhs.issued, rhs.box) == (4, 1, 2, (64, 64))


@pytest.mark.parametrize("m, n, b, expected", [
    (384, 512, 1, 2 * 2 * 2),        # 3 tile rows -> 2 cluster rows (the last one's rank 1 is past M)
    (128, 256, 1, 2),                # one tile: a cluster of it and a tile of zero fill
    (4096, 4096, 1, 132),
    (300, 300, 3, 2 * (2 * 2 * 3)),  # 2 cluster rows (3 tile rows), 2 tile columns, 3 batch entries
])
def test_cube_count_is_whole_clusters_over_cluster_tiles(m, n, b, expected):
    p = problem(b=b, m=m, n=n, k=64)
    alg, cfg = setup(p, cluster_m=2, warpgroups_m=2, tile_n=256, stages=4, store_parts=2)
    assert alg.cube_count(cfg, p) == expected


def test_unknown_cluster_shape_is_refused():
    with pytest.raises(SetupError, match="cluster_m=3"):
        setup(problem(), cluster_m=3)


def test_lines_that_do_not_split_into_swizzle_atoms_are_refused():
    _, cfg = setup(problem(m=4096, n=4096, k=4096, layouts=("row", "col")))
    operand = replace(cfg.batch.global_.rhs_loader.operand, cols=24)     # 24 lines, one copy
    with pytest.raises(SetupError, match="8-line swizzle atoms"):
        TmaLoader().setup(operand, 1, shared_by=2)


class NoClusterBatch(TmaPersistentBatchMatmul):
    """A user's batch level that launches no clusters, whatever the global level asks."""

    name = "no_cluster_batch"

    def scope(self, cfg, d=None):
        return replace(super().scope(cfg, d), cluster_m=1, cluster_rank="0")


def test_global_level_refuses_a_batch_level_that_launches_no_clusters():
    class Alg(SpecializedWgmmaAlgorithm):
        name = "specialized_wgmma_no_clusters"
        batch = NoClusterBatch
    alg = Alg(cluster_m=2)
    p = problem(m=4096, n=4096, k=4096, layouts=("row", "col"))
    cfg = alg.setup(p, SM90)
    with pytest.raises(SetupError, match="cluster_m=2, but the batch level launches clusters of 1"):
        alg.render(cfg, SM90)


# -- nvcc ------------------------------------------------------------------------------------------
def compile_case_sources() -> dict:
    out = {}
    for dt, layouts, tn in (("float16", ("row", "col"), 256), ("bfloat16", ("col", "row"), 256),
                            ("float16", ("row", "row"), 128)):
        alg, cfg = setup(problem(m=1000, n=1000, k=300, dtype=dt, layouts=layouts), cluster_m=2, tile_n=tn,
                         stages=4, store_parts=2)
        out[f"{dt}-{''.join(x[0] for x in layouts)}-{tn}"] = alg.render(cfg, SM90)
    return out


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(compile_case_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)))
def test_sources_compile_for_sm90a():
    nvcc = nvcc_or_skip()
    failures = compile_all(compile_case_sources(), nvcc, archs=archs_for(SpecializedWgmmaAlgorithm.min_arch))
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:2])


# -- numerics on an H100 / H200 --------------------------------------------------------------------
CASES = [  # (batch, m, n, k, layouts, ld pad, tile_n)
    (1, 384, 512, 128, ("row", "col"), 0, 256),     # 3 tile rows: the second cluster's rank 1 is past M
    (1, 129, 257, 65, ("row", "row"), 7, 256),      # edges, MN-major rhs (whole copies shared)
    (1, 127, 255, 63, ("col", "col"), 9, 128),
    (3, 300, 520, 200, ("row", "col"), 8, 256),     # batch entries
    (1, 1000, 1000, 1000, ("col", "row"), 0, 128),  # several cluster tiles per cluster
    (1, 2, 3, 5, ("row", "col"), 11, 256),
    (1, 4096, 2048, 512, ("row", "col"), 0, 256),   # every multiprocessor, many tiles each
    (1, 1000, 3000, 3000, ("row", "row"), 0, 256),  # rows of 6000 bytes, uncopied (the ragged-sector rule's)
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + "-" + "".join(x[0] for x in c[4]))
def test_numerics(rng, dtype, case):
    engine = sm90_engine()
    b, m, n, k, layouts, pad, tn = case
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    da, db = padded(engine, a, layouts[0], pad), padded(engine, bb, layouts[1], pad)
    out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(dtype)))
    engine.matmul(da, db, out=out, algorithm=SpecializedWgmmaAlgorithm(cluster_m=2, tile_n=tn, stages=4, store_parts=2))
    assert_close(engine.runtime.to_host(out), a, bb, dtype)


def test_fused_epilogue_and_broadcast_b(rng):
    engine = sm90_engine()
    m, n, k = 640, 384, 192
    a, bb = random(rng, (2, m, k), "float16"), random(rng, (k, n), "float16")
    c = random(rng, (2, m, n), "float16")
    bias = random(rng, (n,), "float16")
    dev = engine.runtime.to_device
    out = engine.matmul(dev(a), dev(bb), c=dev(c), beta=0.5, bias=dev(bias), activation="relu", alpha=2.0,
                        algorithm=SpecializedWgmmaAlgorithm(cluster_m=2))
    f = np.float64
    ref = np.maximum(2.0 * (a.astype(f) @ bb.astype(f)) + 0.5 * c.astype(f) + bias.astype(f), 0)
    got = engine.runtime.to_host(out).astype(f)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


def test_int8_is_exact(rng):
    engine = sm90_engine()
    a = rng.integers(-128, 128, (700, 300), dtype=np.int8)
    b = np.asfortranarray(rng.integers(-128, 128, (300, 520), dtype=np.int8))
    out = engine.matmul(engine.runtime.to_device(a), engine.runtime.to_device(b),
                        algorithm=SpecializedWgmmaAlgorithm(cluster_m=2))
    assert np.array_equal(engine.runtime.to_host(out), a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("cluster_m", [1, 2])
@pytest.mark.parametrize("kind", ["row", "block"])
def test_fp8_promoted_with_scales(rng, kind, cluster_m):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    engine = sm90_engine()
    m, n, k = 777, 520, 700
    a = (rng.standard_normal((m, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    b = np.asfortranarray((rng.standard_normal((k, n)) * 3).astype(ml_dtypes.float8_e4m3fn))
    if kind == "row":
        sa, sb = np.float32(rng.random(m) + 0.5), np.float32(rng.random(n) + 0.5)
        fa, fb = np.repeat(sa[:, None], k, 1), np.repeat(sb[None, :], k, 0)
    else:
        kb, nb = -(-k // 128), -(-n // 128)
        sa, sb = np.float32(rng.random((m, kb)) + 0.5), np.float32(rng.random((kb, nb)) + 0.5)
        fa = np.repeat(sa, 128, 1)[:, :k]
        fb = np.repeat(np.repeat(sb, 128, 0), 128, 1)[:k, :n]
    # Host arrays (CuPy holds no fp8): the engine copies them over and returns the result.
    out = engine.matmul(a, b, scale_a=sa, scale_b=sb, algorithm=SpecializedWgmmaAlgorithm(cluster_m=cluster_m))
    ref = (a.astype(np.float64) * fa) @ (b.astype(np.float64) * fb)
    got = np.asarray(out, np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3
