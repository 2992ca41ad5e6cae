"""global_/quantized_decode_config.py: the decode config's derived sizes (codes per word, rows per
step and block, k-steps, tiles, how often scales reload, the reduction's shared memory) from a
set-up config, and the default tiling per M and code width."""
from __future__ import annotations

import dataclasses
import types

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16
from gemm_engine.global_.quantized_decode import QuantizedDecodeGlobalMatmul
from gemm_engine.global_.quantized_decode_config import STEP_WORDS, default_tiling
from gemm_engine.problem import MatmulProblem
from gemm_engine.quant.format import WeightFormat

SM90 = dialect_for(nominal_cuda_device())


def _cfg(fmt="int4", group=128, m=4, **sel):
    w = WeightFormat(fmt, group_size=group)
    problem = MatmulProblem(1, m, 512, 1024, FLOAT16, FLOAT16, FLOAT16, weights=w)
    selection = types.SimpleNamespace(**{"planes": 4, "column_loads": 0, "unroll": 0, "planes_along": "k", "prefetch": -1, "row_tiles": 0, **sel})
    return QuantizedDecodeGlobalMatmul().setup(problem, selection, SM90)


def test_sizes_follow_the_codes_per_word():
    cfg = _cfg()
    assert cfg.per_word == 8 and cfg.step_k == STEP_WORDS * 8 == 32 and cfg.k_steps == 2
    assert cfg.block_k == cfg.unroll * 32 and cfg.tiles == 2 * cfg.loads and cfg.plane_columns == 32 * cfg.loads
    eight = _cfg("int8", group=0)
    assert eight.per_word == 4 and eight.step_k == 16 and eight.k_steps == 1


@pytest.mark.parametrize("group, unroll, per", [(0, 4, "once"), (128, 4, "block"), (256, 4, "block"),
                                                (64, 4, "step"), (32, 1, "block")])
def test_scales_reload(group, unroll, per):
    assert _cfg(group=group, unroll=unroll).scales_per == per


def test_reduction_memory():
    cfg = _cfg()
    assert cfg.reduce_floats == 4 * cfg.stage.stage_m * cfg.stage.stage_n
    assert cfg.shared_memory_bytes == 4 * cfg.reduce_floats             # native plane product: no scratch
    along_n = _cfg(planes_along="n")
    assert along_n.reduce_floats == 0
    emulated = dataclasses.replace(cfg, scratch=384)
    assert emulated.shared_memory_bytes == 4 * (cfg.reduce_floats + 4 * 384)


@pytest.mark.parametrize("m_tiles, per_word, pairs, tiling", [
    (1, 8, False, (2, 4)), (2, 8, False, (2, 2)), (3, 8, False, (2, 2)), (4, 8, False, (2, 2)), (8, 8, False, (1, 1)),
    (1, 4, False, (2, 2)), (2, 4, False, (2, 2)), (4, 4, False, (2, 1)), (8, 4, False, (1, 1)),
    (1, 4, True, (2, 4)), (2, 4, True, (2, 4)), (4, 4, True, (2, 2))])
def test_default_tiling(m_tiles, per_word, pairs, tiling):
    # 8-bit codes by the float path: half the unroll (temporaries); by pairs: int4's rows of K a block
    assert default_tiling(m_tiles, per_word, pairs=pairs) == tiling
