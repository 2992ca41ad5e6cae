"""The plane stage asks every tile for its paired rhs load (`TileMatmul.load_rhs_pair`, "" where it
has none: the base's answer) instead of probing for the method."""
from __future__ import annotations

import re

from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import StageEventListener
from gemm_engine.tile.base import TileMatmul
from gemm_engine.tile.mma import MmaTile

D = dialect_for(nominal_cuda_device(9, 0))
F16 = BY_NAME["float16"]
PROBLEM = MatmulProblem(1, 512, 512, 512, F16, F16, F16, Layout.ROW, Layout.COL, 8, 8)


class UnpairedMma(MmaTile):
    """An mma tile without a paired rhs load of its own."""

    load_rhs_pair = TileMatmul.load_rhs_pair


class UnpairedPipelined(PipelinedMmaAlgorithm):
    name = "unpaired_pipelined"
    tile = UnpairedMma


def _rhs_loads(alg_class) -> list[set[str]]:
    alg = alg_class(fragment_buffering=True, partition_n=4)
    stage, cfg = alg.components.global_.stage, alg.setup(PROBLEM, D).batch.global_.stage
    code = stage.execute(cfg, D, "lhs_smem", "rhs_smem", StageEventListener())
    return [set(re.findall(r"rhs_frag_\d_\d", line)) for line in code.splitlines()
            if "rhs_frag" in line and "ptx_mma" not in line]


def test_a_tile_without_a_paired_load_gets_one_load_per_fragment():
    assert TileMatmul.load_rhs_pair(MmaTile(), None, D, "x", "y", None) == ""
    assert any(len(names) == 2 for names in _rhs_loads(PipelinedMmaAlgorithm))
    unpaired = _rhs_loads(UnpairedPipelined)
    assert unpaired and all(len(names) == 1 for names in unpaired)
