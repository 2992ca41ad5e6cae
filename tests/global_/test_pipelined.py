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
