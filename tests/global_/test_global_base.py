"""What the global level's base (global_/base.py) declares for its neighbours instead of being
probed for: each operand's loader config by name, the tile-loop request, the writer's config
(always one), and whether the operands must be K-major (asked of the stage)."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT32
from gemm_engine.global_.base import TileLoopRequest
from gemm_engine.global_.skinny import SkinnyGlobalMatmul
from gemm_engine.global_.write.writers import WriterConfig
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def _unit_cfg():
    return SimpleUnitAlgorithm().setup(MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32), SM90).batch.global_


def test_loader_configs_by_operand_name():
    g = _unit_cfg()
    assert g.loader("lhs") is g.lhs_loader and g.loader("rhs") is g.rhs_loader
    with pytest.raises(ValueError, match="'lhs' or 'rhs'"):
        g.loader("out")


def test_a_level_without_a_tile_loop_request_asks_for_nothing():
    assert _unit_cfg().tile_loop == TileLoopRequest(cluster_m=1, split_tail=0)


def test_every_config_has_a_writer_config():
    g = _unit_cfg()
    assert isinstance(g.writer, WriterConfig) and not g.writer.tma_store


def test_k_major_operands_are_the_stages_question():
    tf32 = MatmulProblem(1, 256, 256, 256, FLOAT32, FLOAT32, FLOAT32, Layout.ROW, Layout.ROW, 4, 4, precision="tf32")
    bf16 = BY_NAME["bfloat16"]
    half = MatmulProblem(1, 256, 256, 256, bf16, bf16, bf16)
    level = SpecializedWgmmaAlgorithm().components.global_
    assert level.stage.requires_k_major(tf32) and level.requires_k_major(tf32)
    assert not level.requires_k_major(half)
    assert not SkinnyGlobalMatmul(stage=None).requires_k_major(tf32)      # no stage: nothing asked
