"""The unit stage's register names are declared data (`UnitStageConfig.fragments`), which its
subclass (the ordered stage) and readers of its code use instead of names they share with it."""
from __future__ import annotations

import re

from gemm_engine.algorithms.ordered import OrderedAlgorithm
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.problem import MatmulProblem
from gemm_engine.stage.events import StageEventListener
from gemm_engine.stage.unit_partitioned import UnitFragments

D = dialect_for(nominal_cuda_device())
PROBLEM = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)


def test_fragment_names():
    one = UnitFragments(1, 1)
    assert (one.acc(0, 0), one.lhs(0), one.rhs(0)) == ("acc", "lhs_frag", "rhs_frag")
    two = UnitFragments(2, 3)
    assert (two.acc(1, 2), two.lhs(1), two.rhs(2)) == ("acc_1_2", "lhs_frag1", "rhs_frag2")


def _stage(alg_class, **knobs):
    alg = alg_class(**knobs)
    return alg.components.global_.stage, alg.setup(PROBLEM, D).batch.global_.stage


def test_the_stage_declares_exactly_its_configs_names():
    stage, cfg = _stage(SimpleUnitAlgorithm, tile_m=2, tile_n=2, partition_m=2, partition_n=2)
    f = cfg.fragments
    declared = set(re.findall(r"\b(acc\w*|lhs_frag\w*|rhs_frag\w*)\[", stage.declare(cfg, D)))
    assert declared == {f.acc(i, j) for i in range(2) for j in range(2)} | {f.lhs(0), f.lhs(1), f.rhs(0), f.rhs(1)}


def test_the_ordered_stage_loads_into_the_configs_lhs_fragment():
    stage, cfg = _stage(OrderedAlgorithm)
    code = stage.execute(cfg, D, "lhs_regs", "rhs_smem", StageEventListener())
    loads = [line for line in code.splitlines() if "lhs_regs[" in line]
    assert loads and all(f"{cfg.fragments.lhs(0)}[i] = lhs_regs[" in line for line in loads), loads
