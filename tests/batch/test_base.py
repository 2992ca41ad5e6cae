"""batch/base.py: the scope handed to the global level, BatchConfig's pass-throughs, and what every
batch level inherits -- the block-scale, grouped-layout and weights refusals (naming the level that
refuses), launch bounds with the occupancy hint, one launch of the whole grid by default."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.base import KERNEL_NAME, CubeScope, Launch, OperandRef
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.problem import Groups, MatmulProblem
from gemm_engine.quant.format import WeightFormat

D = dialect_for(nominal_cuda_device())
DENSE = MatmulProblem(2, 100, 72, 64, FLOAT32, FLOAT32, FLOAT32)


def _level():
    alg = SimpleUnitAlgorithm()
    return alg.build(), alg.setup(DENSE, D).batch


def test_scope_operands_by_name():
    scope = CubeScope(OperandRef("A", "lda"), OperandRef("B", "ldb"), OperandRef("C", "ldc", map_flag="ok"))
    assert scope.operand("rhs").ptr == "B" and scope.operand("out").map_flag == "ok"
    with pytest.raises(ValueError, match="'lhs', 'rhs' or 'out'"):
        scope.operand("c")
    # The tile loop callback does not take part in comparisons.
    assert dataclasses.replace(scope, tiles=lambda body: body) == scope


def test_config_passes_through_its_global_config():
    _, cfg = _level()
    assert cfg.units == cfg.global_.units and cfg.result == cfg.global_.out
    assert cfg.epilogue == cfg.global_.epilogue and cfg.persistent_cubes == 0


def test_one_launch_of_every_tile_by_default():
    level, cfg = _level()
    [launch] = level.launches(cfg, DENSE)
    assert launch == Launch(KERNEL_NAME, level.cube_count(cfg, DENSE), cfg.units)
    assert launch.cubes >= 2 * -(-100 // cfg.global_.stage.stage_m) * -(-72 // cfg.global_.stage.stage_n)
    assert level.workspace(cfg, DENSE) is None and level.kept_workspace(cfg, DENSE) is None
    assert level.call_values(cfg, DENSE) is None and level.kernel_attributes(cfg, D) == ""


def test_launch_bounds_carry_the_occupancy_hint():
    level, cfg = _level()
    assert level.launch_bounds(cfg) == f"LAUNCH_BOUNDS({cfg.units})"
    level.global_.occupancy = 1
    assert level.launch_bounds(cfg) == f"LAUNCH_BOUNDS_MIN({cfg.units}, 1)"


def test_block_scales_are_refused_by_the_global_level_that_cannot_apply_them():
    level, _ = _level()
    level.check_block_scales(DENSE)
    blocked = dataclasses.replace(DENSE, epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    with pytest.raises(SetupError, match="per block of 128") as info:
        level.check_block_scales(blocked)
    assert info.value.component == level.global_.name
    level.global_.applies_block_scales = True
    level.forwards_block_scales = False
    with pytest.raises(SetupError, match="splits K") as info:
        level.check_block_scales(blocked)
    assert info.value.component == level.name


def test_grouped_layouts_only_where_the_level_walks_them():
    level, _ = _level()
    level.check_groups(DENSE)
    grouped = dataclasses.replace(DENSE, groups=Groups("contiguous"))
    with pytest.raises(SetupError, match="layout 'contiguous'"):
        level.check_groups(grouped)
    level.group_layouts = frozenset({"masked"})
    with pytest.raises(SetupError, match=r"walks \['masked'\] only"):
        level.check_groups(grouped)
    with pytest.raises(SetupError, match="this problem is dense"):
        level.check_groups(DENSE)
    level.check_groups(dataclasses.replace(DENSE, groups=Groups("masked")))


def test_weights_need_a_level_that_passes_them():
    level, _ = _level()
    level.check_weights(DENSE)
    quantized = dataclasses.replace(DENSE, weights=WeightFormat("int8"))
    level.passes_weights = False
    with pytest.raises(SetupError, match="int8 rhs") as info:
        level.check_weights(quantized)
    assert info.value.component == level.name
    level.passes_weights = True
    with pytest.raises(SetupError, match="dequantizing loader"):   # then its global level's question
        level.check_weights(quantized)
