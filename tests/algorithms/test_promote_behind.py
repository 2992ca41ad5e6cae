"""Promotion behind the next batch (``promote_behind``): a promoting Hopper kernel (fp8, block
scales) adds each K slice into its float32 sums while its next slice's wgmma runs, in a third
accumulator set. Structure and refusals here; numerics on an sm_90 GPU for every count of slices
the loop's prologue, pairs and tail handle (1 to 5), every scale kind, batch, ping-pong, clusters."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import archs_for, compile_jobs, failures_of, jobs_of, nvcc_or_skip, prefetched
from hopper_support import SM90, fp8_operands, fp8_problem, sm90_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

TILE = dict(warpgroups_m=2, partition_m=1, tile_n=128, stages=6)


def test_kernel_keeps_a_second_partial_set_and_waits_for_one_batch_less():
    p = fp8_problem(scales="block")
    alg = SpecializedWgmmaAlgorithm(**TILE, promote_behind=True)
    cfg = alg.setup(p, SM90)
    assert cfg.batch.global_.promotion.behind
    src = alg.render(cfg, SM90)
    assert "accb_0[64];" in src
    # The steady loop takes slices in pairs and adds each one with the next one's batch in flight;
    # no branch inside it (ptxas serializes wgmma when one reads accumulators in a branch there).
    loop = src[src.index("for (; step + 1 < k_steps; step += 2) {"):src.index("if (step < k_steps) {")]
    assert loop.count("ptx_wgmma_wait_1();") == 2 and "if (" not in loop.replace("if (UNIT_ID % 128 == 0)", "")
    assert "lhs_scale[" in loop and "(step - 1)" in loop
    off = SpecializedWgmmaAlgorithm(**TILE, promote_behind=False)
    plain = off.render(off.setup(p, SM90), SM90)
    assert "accb_0" not in plain and "ptx_wgmma_wait_1();" not in plain


def test_three_consumer_warpgroups_are_refused_naming_the_registers():
    with pytest.raises(SetupError, match="promote_behind keeps three accumulator sets: 192 registers per unit of "
                                         "a consumer's 152"):
        SpecializedWgmmaAlgorithm(warpgroups_m=3, partition_m=1, tile_n=128, stages=5,
                                  promote_behind=True).setup(fp8_problem(m=4096, n=4096, k=4096), SM90)


def test_unpromoted_problems_ignore_the_knob():
    p = MatmulProblem(1, 256, 256, 256, BY_NAME["float16"], BY_NAME["float16"], BY_NAME["float16"],
                      Layout.ROW, Layout.ROW, 8, 8)
    cfg = SpecializedWgmmaAlgorithm(promote_behind=True).setup(p, SM90)
    assert cfg.batch.global_.promotion is None


# -- numerics on an H100 / H200 --------------------------------------------------------------------
CASES = [  # (batch, m, n, k, scale kind, more knobs): K slices 1 to 5, odd edges
    (1, 129, 257, 100, "block", {}),
    (1, 200, 136, 256, "row", {}),
    (2, 130, 250, 300, "block", {}),
    (1, 777, 520, 512, None, {}),
    (1, 300, 400, 600, "block", {}),
    (1, 1000, 700, 1100, "row", {"schedule": "pingpong", "warpgroups_m": 1}),
    (1, 2000, 1500, 700, "block", {"cluster_m": 2}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-{len(c[5])}")
def test_numerics(rng, case):
    b, m, n, k, kind, more = case
    a, bb, sa, sb, ref = fp8_operands(rng, b, m, n, k, kind)
    engine = sm90_engine()
    alg = SpecializedWgmmaAlgorithm(**{**TILE, **more, "promote_behind": True})
    out = engine.matmul(a, bb, scale_a=sa, scale_b=sb, algorithm=alg)
    assert engine.last_choice[1].batch.global_.promotion.behind
    got = np.asarray(out, np.float64)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


# -- nvcc ------------------------------------------------------------------------------------------
def behind_sources() -> dict:
    out = {}
    for kind, more in (("block", {}), ("row", {}), (None, {"schedule": "pingpong", "warpgroups_m": 1})):
        alg = SpecializedWgmmaAlgorithm(**{**TILE, **more, "promote_behind": True})
        out[f"behind-{kind}-{len(more)}"] = alg.render(alg.setup(fp8_problem(4096, 4096, 4096, kind), SM90), SM90)
    return out


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(behind_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)))
def test_sources_compile_without_serialized_wgmma():
    """ptxas serializes every wgmma of a kernel (C7514) when accumulators are read where it cannot
    tell their batch is done: a branch around the additions inside the loop did that."""
    nvcc = nvcc_or_skip()
    results = compile_jobs(jobs_of(behind_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)), nvcc)
    assert not failures_of(results)
    for compiled in results.values():
        assert "C7514" not in compiled.log, compiled.log[-2000:]


def test_default_promotes_behind_with_two_consumers_only():
    d = SpecializedWgmmaAlgorithm()
    assert d.selection_for(fp8_problem(4096, 4096, 4096), SM90).promote_behind       # 128 x 128
    big = d.selection_for(fp8_problem(8192, 8192, 8192), SM90)                     # 192 x 128
    assert big.warpgroups_m == 3 and not big.promote_behind
