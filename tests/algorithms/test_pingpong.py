"""Ping-pong consumers on the Hopper Specialized pipeline (``schedule="pingpong"``): two copies of a
one-warpgroup stage take the cube's tiles in turns, each with its own staging tile; structure and
refusals here, numerics on an sm_90 GPU."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import assert_close, np_dtype, random
from hopper_support import SM90, padded, problem, setup, sm90_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.selector.specialized_wgmma import pingpong_preset
from gemm_engine.errors import SetupError


def pingpong(p, partition_m=2, tile_n=128, **more):
    return SpecializedWgmmaAlgorithm(**{**pingpong_preset(p, SM90, partition_m, tile_n), **more})


@pytest.mark.parametrize("partition_m, tile_n", [(2, 128), (1, 256)])
def test_kernel_structure(partition_m, tile_n):
    p = problem(m=4096, n=4096, k=4096, layouts=("row", "row"))
    alg = pingpong(p, partition_m, tile_n)
    cfg = alg.setup(p, SM90)
    g = cfg.batch.global_
    assert (g.groups, g.slot_readers, g.consumers, g.units) == (2, 1, 2, 3 * 128)
    # Two staging tiles beside the ring, all in the multiprocessor's shared memory.
    assert g.dynamic_shared_bytes >= g.ring_bytes + 2 * g.staging and g.dynamic_shared_bytes <= 227 * 1024
    src = alg.render(cfg, SM90)
    # One reader per slot: its empty barrier expects one arrival a phase.
    assert src.count(f"ptx_mbarrier_init((ring_bars + 8u * ({g.stages}u + (0))), 1);") == 1
    # Each copy walks its own turns of the cube's tiles, on its own named barrier.
    assert "for (i64 cube = CUBE_ID + (pp_group) * CUBE_COUNT;" in src and "cube += 2 * CUBE_COUNT" in src
    assert "ptx_named_barrier((unsigned)(1 + pp_group), 128u);" in src
    assert "it += 1u * (unsigned)k_steps;" in src
    # The copies' main loops take turns: two more mbarriers after the ring's.
    assert f"if (turn + pp_group > 0) ptx_mbarrier_wait((ring_bars + 8u * ({2 * g.stages}u + (pp_group)))" in src


def test_pingpong_with_clusters_walks_cluster_tiles_in_turns():
    p = problem(m=8192, n=8192, k=8192, layouts=("row", "col"))
    alg = pingpong(p, cluster_m=2)
    src = alg.render(alg.setup(p, SM90), SM90)
    assert "for (i64 cube = CUBE_ID / 2 + (pp_group) * (CUBE_COUNT / 2);" in src


def test_cooperative_stage_of_two_warpgroups_is_refused_for_pingpong():
    with pytest.raises(SetupError, match="4 consumer warpgroups .ping-pong"):
        setup(problem(m=4096, n=4096, k=4096), schedule="pingpong", warpgroups_m=2, tile_n=128, stages=3)


def test_unknown_schedule_is_refused_naming_the_knob():
    with pytest.raises(ValueError, match="schedule: expected one of .'cooperative', 'pingpong'."):
        setup(problem(), schedule="interleaved")


# -- numerics on an H100 / H200 --------------------------------------------------------------------
CASES = [  # (batch, m, n, k, layouts, ld pad, partition_m, tile_n, cluster_m)
    (1, 384, 512, 128, ("row", "row"), 0, 2, 128, 1),   # 12 tiles, one per cube: copy 1 has none
    (1, 129, 257, 65, ("row", "col"), 7, 2, 128, 1),    # edges
    (3, 300, 520, 200, ("col", "col"), 8, 1, 256, 1),   # batch, 64 x 256 tiles
    (1, 2000, 1500, 300, ("row", "row"), 0, 2, 128, 1), # 16 x 12 tiles: an odd count per cube
    (1, 2000, 1500, 300, ("row", "col"), 0, 2, 128, 2), # with clusters
    (1, 2, 3, 5, ("row", "col"), 11, 1, 256, 1),
    # Several tiles per copy, each more slices than the ring has slots: a copy starting its next
    # tile is k_steps slices past its last one, which only the turns keep within one phase.
    (1, 4096, 2048, 1024, ("row", "row"), 0, 2, 128, 1),
    (1, 4096, 2048, 1024, ("row", "col"), 0, 1, 256, 2),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[6] * 64}x{c[7]}-c{c[8]}")
def test_numerics(rng, dtype, case):
    engine = sm90_engine()
    b, m, n, k, layouts, pad, pm, tn, cm = case
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    da, db = padded(engine, a, layouts[0], pad), padded(engine, bb, layouts[1], pad)
    out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(dtype)))
    p = problem(b=b, m=m, n=n, k=k, dtype=dtype, layouts=layouts)
    engine.matmul(da, db, out=out, algorithm=pingpong(p, pm, tn, cluster_m=cm))
    assert_close(engine.runtime.to_host(out), a, bb, dtype)


def test_fused_epilogue(rng):
    engine = sm90_engine()
    m, n, k = 1000, 640, 192
    a, bb = random(rng, (m, k), "float16"), random(rng, (k, n), "float16")
    bias = random(rng, (n,), "float16")
    dev = engine.runtime.to_device
    out = engine.matmul(dev(a), dev(bb), bias=dev(bias), activation="relu", alpha=2.0,
                        algorithm=pingpong(problem(m=m, n=n, k=k)))
    f = np.float64
    ref = np.maximum(2.0 * (a.astype(f) @ bb.astype(f)) + bias.astype(f), 0)
    got = engine.runtime.to_host(out).astype(f)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


def test_int8_is_exact(rng):
    engine = sm90_engine()
    a = rng.integers(-128, 128, (700, 300), dtype=np.int8)
    b = np.asfortranarray(rng.integers(-128, 128, (300, 520), dtype=np.int8))
    out = engine.matmul(engine.runtime.to_device(a), engine.runtime.to_device(b),
                        algorithm=SpecializedWgmmaAlgorithm(schedule="pingpong", warpgroups_m=1, partition_m=2,
                                                            tile_n=128, stages=4, store_parts=4))
    assert np.array_equal(engine.runtime.to_host(out), a.astype(np.int64) @ b.astype(np.int64))


def test_fp8_promoted_with_row_scales(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    engine = sm90_engine()
    m, n, k = 777, 520, 700
    a = (rng.standard_normal((m, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    b = np.asfortranarray((rng.standard_normal((k, n)) * 3).astype(ml_dtypes.float8_e4m3fn))
    sa, sb = np.float32(rng.random(m) + 0.5), np.float32(rng.random(n) + 0.5)
    alg = SpecializedWgmmaAlgorithm(schedule="pingpong", warpgroups_m=1, partition_m=1, tile_n=128, stages=6)
    out = engine.matmul(a, b, scale_a=sa, scale_b=sb, algorithm=alg)
    ref = (a.astype(np.float64) * sa[:, None]) @ (b.astype(np.float64) * sb[None, :])
    got = np.asarray(out, np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3
