"""Promotion (global_/promotion.py) names the accumulator sets by the stage config's declared
`WarpgroupFragments`, not by names it shares with the stage."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.base import CubeScope, OperandRef
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.global_.promotion import Promotion
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.warpgroup_partitioned import WarpgroupFragments

SM90 = dialect_for(nominal_cuda_device(9, 0))
E4M3 = BY_NAME["float8_e4m3fn"]
SCOPE = CubeScope(OperandRef("lhs", "lhs_ld"), OperandRef("rhs", "rhs_ld"), OperandRef("out", "out_ld"))


def test_the_main_loop_uses_the_stage_configs_set_names():
    p = MatmulProblem(1, 512, 512, 1024, E4M3, E4M3, BY_NAME["bfloat16"], Layout.ROW, Layout.COL, 16, 16,
                      epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    alg = SpecializedWgmmaAlgorithm(warpgroups_m=2, partition_m=1, tile_n=128, stages=6, promote_behind=True)
    stage = alg.components.global_.stage
    st = replace(alg.setup(p, SM90).batch.global_.stage, fragments=WarpgroupFragments("front", "back", "sums"))
    code = "\n".join(Promotion(True, True, behind=True).main_loop(stage, st, SM90, SCOPE,
                                                                  lambda acc: [f"ISSUE({acc});"], lambda i: ""))
    assert "ISSUE(front);" in code and "ISSUE(back);" in code
    names = set(re.findall(r"\b([a-z]+)_0\[", code))
    assert names == {"front", "back", "sums"}, names
    declared = stage.declare(st, SM90) + stage.declare_promoted(st, SM90, behind=True)
    assert {"front_0", "back_0", "sums_0"} <= set(re.findall(r"\b\w+_0\b", declared))


def test_rhs_block_scales_refuse_tiles_that_straddle_blocks():
    """A warpgroup reads one rhs scale per 128-column block of its columns: 96-column tiles (cube 1
    spans columns 96-191, two blocks) are refused before launch; 64 and 128 run; row-wise rhs
    scales do not care."""
    def p(rhs_scale):
        return MatmulProblem(1, 512, 512, 1024, E4M3, E4M3, BY_NAME["bfloat16"], Layout.ROW, Layout.COL, 16, 16,
                             epilogue=Epilogue(lhs_scale="block", rhs_scale=rhs_scale))
    with pytest.raises(SetupError, match="tile_n=96 tiles straddle blocks"):
        SpecializedWgmmaAlgorithm(warpgroups_m=2, tile_n=96, stages=6).setup(p("block"), SM90)
    for tn in (64, 128):
        SpecializedWgmmaAlgorithm(warpgroups_m=2, tile_n=tn, stages=6).setup(p("block"), SM90)
    SpecializedWgmmaAlgorithm(warpgroups_m=2, tile_n=96, stages=6).setup(p("row"), SM90)
