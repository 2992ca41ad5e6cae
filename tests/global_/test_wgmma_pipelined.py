"""global_/wgmma_pipelined.py (rendered for the nominal sm_90 device): the swizzled wgmma ring --
prefetch depth from stages and pending batches, its shared memory (with the atom alignment slack),
the refusals naming the numbers -- and the rendered ring waiting on cp.async groups and wgmma."""
from __future__ import annotations

import re

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.wgmma import ATOM_BYTES

SM90 = dialect_for(nominal_cuda_device())
BF16 = BY_NAME["bfloat16"]
PROBLEM = MatmulProblem(1, 512, 512, 512, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 8)
ALG = REGISTRY["pipelined_wgmma"]


@pytest.mark.parametrize("stages, pending, prefetch", [(4, 1, 2), (3, 0, 2), (3, 1, 1), (5, 1, 3)])
def test_prefetch_and_shared_memory(stages, pending, prefetch):
    cfg = ALG(stages=stages, wgmma_pending=pending).setup(PROBLEM, SM90).batch.global_
    assert cfg.prefetch == prefetch and cfg.pending == pending
    assert cfg.dynamic_shared_bytes == stages * cfg.shared_memory_bytes + ATOM_BYTES
    source = ALG(stages=stages, wgmma_pending=pending).render(ALG(stages=stages, wgmma_pending=pending)
                                                               .setup(PROBLEM, SM90), SM90)
    assert f"ptx_wgmma_wait_{pending}()" in source
    assert any(int(n) <= prefetch for n in re.findall(r"ptx_cp_async_wait_(\d+)\(\)", source))


@pytest.mark.parametrize("sel, needle", [({"wgmma_pending": 2}, "wgmma_pending=2; expected 0 or 1"),
                                         ({"stages": 2, "wgmma_pending": 1}, "prefetches nothing"),
                                         ({"stages": 64}, "bytes of shared memory")])
def test_refusals(sel, needle):
    with pytest.raises(SetupError) as info:
        ALG(**sel).setup(PROBLEM, SM90)
    assert needle in str(info.value)


def test_needs_sm_90():
    with pytest.raises(SetupError, match="needs wgmma"):
        ALG().setup(PROBLEM, dialect_for(nominal_cuda_device(8, 0)))
