"""algorithms/pipelined.py (rendered for the nominal sm_80 device): ``pipelined_mma`` -- mma.sync
tiles fed by the cp.async ring through chunk loaders, paired stores -- its tiling rule and every
preset of its tuning space set up, and the ring is in its source."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm, PipelinedSelection
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16
from gemm_engine.global_.pipelined import PipelinedGlobalMatmul
from gemm_engine.global_.read.async_loader import ChunkLoader
from gemm_engine.global_.write.writers import PairedWriter
from gemm_engine.problem import MatmulProblem

SM80 = dialect_for(nominal_cuda_device(8, 0))


@pytest.mark.parametrize("m, n, k", [(4096, 4096, 4096), (256, 512, 1024), (100, 70, 37)])
def test_rule_and_space_set_up(m, n, k):
    problem = MatmulProblem(1, m, n, k, FLOAT16, FLOAT16, FLOAT16, lhs_align=8 if k % 8 == 0 else 1,
                            rhs_align=8 if n % 8 == 0 else 2)
    alg = PipelinedMmaAlgorithm()
    slots = alg.slots()
    assert (slots["global_"], slots["lhs_loader"], slots["writer"]) == (PipelinedGlobalMatmul, ChunkLoader, PairedWriter)
    cfg = alg.setup(problem, SM80)
    assert isinstance(cfg.selection, PipelinedSelection) and cfg.batch.global_.stages >= 2
    assert "ptx_cp_async_" in alg.render(cfg, SM80)
    space = alg.tuning_space(problem, SM80)
    assert space
    for preset in space:
        alg.with_selection(preset).setup(problem, SM80)
