"""global_/pipelined.py (rendered for the nominal sm_80 / sm_90 devices): the cp.async ring's setup --
its dynamic shared memory, the stage count and fit checks naming the numbers, the carried-fragment
requirements -- the ring it leaves to the writer, and the rendered ring (S - 1 slices in flight)."""
from __future__ import annotations

import re

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from cuda_compile import ARCHS, compile_jobs, nvcc_or_skip, prefetched, spill_problems_of

SM80 = dialect_for(nominal_cuda_device(8, 0))
PIPE = REGISTRY["pipelined_mma"]
PROBLEM = MatmulProblem(1, 256, 256, 256, FLOAT16, FLOAT16, FLOAT16, Layout.ROW, Layout.ROW, 8, 8)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_ring_sizes(stages):
    alg = PIPE(stages=stages)
    cfg = alg.setup(PROBLEM, SM80).batch.global_
    assert cfg.stages == stages
    assert cfg.dynamic_shared_bytes == stages * (cfg.lhs_loader.smem_bytes + cfg.rhs_loader.smem_bytes)
    ring = alg.build().global_.shared_ring(cfg, SM80)
    assert ring.bytes == cfg.dynamic_shared_bytes and ring.drain


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_the_ring_waits_for_all_but_the_slices_in_flight(stages):
    alg = PIPE(stages=stages)
    source = alg.render(alg.setup(PROBLEM, SM80), SM80)
    waits = set(re.findall(r"ptx_cp_async_wait_(\d+)\(\)", source))
    assert str(stages - 2) in waits
    assert "ptx_cp_async_commit()" in source


def test_refusals():
    with pytest.raises(SetupError, match="stages=1: a ring needs at least 2"):
        PIPE(stages=1).setup(PROBLEM, SM80)
    with pytest.raises(SetupError, match="needs cp.async"):
        PIPE().setup(PROBLEM, dialect_for(DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)))
    small = dialect_for(DeviceInfo("cuda", "small", 8, 49152, 1024, 32, compute_capability=(8, 0)))
    with pytest.raises(SetupError, match=r"8 stages need \d+ bytes of shared memory, the device allows 49152"):
        PIPE(stages=8).setup(PROBLEM, small)
    with pytest.raises(SetupError, match="carry_fragments=True needs 3 or more stages"):
        PIPE(stages=2, carry_fragments=True).setup(PROBLEM, SM80)


# -- swizzled rows (the plane stage's smem_swizzle): 3 slots of 128 x 128 x 32 in 48 KiB, built by nvcc
SWIZZLED = dict(planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=3,
                fragment_buffering=True, smem_swizzle=True)
#: (shape, layouts, alignment): the big square, odd extents in both layouts, unaligned (the register
#: path's staged stores), a 128 x 256 stage whose rhs tasks step 4 lines (own addresses).
SWIZZLED_CASES = [((4096, 4096, 4096), (Layout.ROW, Layout.ROW), 8, {}),
                  ((257, 131, 77), (Layout.COL, Layout.COL), 8, {}),
                  ((257, 131, 77), (Layout.ROW, Layout.COL), 1, {}),
                  ((1000, 1000, 1000), (Layout.COL, Layout.ROW), 2, {"stages": 2}),
                  ((4096, 4096, 4096), (Layout.ROW, Layout.ROW), 8, {"partition_n": 16, "stage_k": 16,
                                                                    "partition_m": 2})]


def swizzled_problem(shape, layouts, align, dtype=FLOAT16):
    return MatmulProblem(1, *shape, dtype, dtype, dtype, *layouts, align, align)


def test_swizzled_ring_fits_48_kib_at_three_slots():
    cfg = PIPE(**SWIZZLED).setup(swizzled_problem(*SWIZZLED_CASES[0][:3]), SM80).batch.global_
    assert cfg.dynamic_shared_bytes == 3 * 16 * 1024
    assert (cfg.stage.lhs_ld, cfg.stage.rhs_ld) == (32, 128)           # no padding
    padded = PIPE(**{**SWIZZLED, "smem_swizzle": False}).setup(swizzled_problem(*SWIZZLED_CASES[0][:3]), SM80)
    assert padded.batch.global_.dynamic_shared_bytes > 48 * 1024      # the padded ring does not fit


def swizzled_jobs() -> list:
    jobs = {}
    for cc, arch in (((8, 0), ARCHS[0]), ((9, 0), ARCHS[1])):
        d = dialect_for(nominal_cuda_device(*cc))
        for shape, layouts, align, more in SWIZZLED_CASES:
            alg = PIPE(**{**SWIZZLED, **more})
            src = alg.render(alg.setup(swizzled_problem(shape, layouts, align), d), d)
            jobs.setdefault((src, arch), f"swizzled {shape} {[x.value for x in layouts]} align {align} {more}")
    return [(name, src, arch) for (src, arch), name in jobs.items()]


@pytest.mark.nvcc
@prefetched(swizzled_jobs)
def test_swizzled_sources_compile_without_spills():
    results = compile_jobs(swizzled_jobs(), nvcc_or_skip())
    problems = spill_problems_of(results)
    assert not problems, "\n\n".join(f"{k}: {v[-3000:]}" for k, v in list(problems.items())[:2])
