"""global_/base.py: what every global level inherits -- its default writer, the listener chain,
global events, stores bounds-checked only on the axes the problem does not divide, the quantized
weights check -- and GlobalConfig's sizes. (Loader configs by name, tile-loop requests and K-major
questions: tests/global_/test_global_base.py.)"""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.accelerated import SimpleMmaAlgorithm
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.base import CubeScope, OperandRef
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.compose.capabilities import XOR_SWIZZLED_SMEM
from gemm_engine.dtypes import FLOAT16, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.base import SharedRing, StoreStaging
from gemm_engine.global_.read.async_loader import ChunkLoader
from gemm_engine.global_.simple import SimpleGlobalMatmul
from gemm_engine.global_.write.writers import DirectWriter
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant.format import WeightFormat
from gemm_engine.stage.events import BeforeStore, ChainedListener, KernelStart, StageEventListener

D = dialect_for(nominal_cuda_device())
SCOPE = CubeScope(OperandRef("A", "lda"), OperandRef("B", "ldb"), OperandRef("C", "ldc"))


def _setup(m=64, n=64, k=64):
    alg = SimpleUnitAlgorithm()
    problem = MatmulProblem(1, m, n, k, FLOAT32, FLOAT32, FLOAT32)
    return alg.build().global_, alg.setup(problem, D).batch.global_


def test_default_writer_only_where_a_writer_slot_is_used():
    assert isinstance(SimpleGlobalMatmul().writer, DirectWriter)

    class NoWriter(SimpleGlobalMatmul):
        uses = ("stage",)
    assert NoWriter().writer is None
    mine = DirectWriter()
    assert SimpleGlobalMatmul(writer=mine).writer is mine


def test_config_sizes():
    _, cfg = _setup()
    assert cfg.shared_memory_bytes == cfg.lhs_loader.smem_bytes + cfg.rhs_loader.smem_bytes > 0
    assert cfg.units == cfg.stage.units and cfg.dynamic_shared_bytes == 0


class _Mine(StageEventListener):
    def on_event(self, event):
        return "mine();" if isinstance(event, BeforeStore) else ""


class _Own(StageEventListener):
    def on_event(self, event):
        return "own();"


def test_chain_puts_the_levels_listener_before_the_algorithms():
    level = SimpleGlobalMatmul()
    own = _Own()
    assert level.chain(own) is own                        # no algorithm listener: the own one alone
    assert type(level.chain()) is level.listener_class
    chained = SimpleGlobalMatmul(listener=_Mine).chain(own)
    assert isinstance(chained, ChainedListener)
    assert chained.on_event(BeforeStore()) == "own();\nmine();"
    assert level.before_store(chained) == ["own();\nmine();"]
    assert level.kernel_start(chained) == ["own();"]
    assert level.kernel_start(StageEventListener()) == []
    assert level.event(_Mine(), KernelStart()) == []


@pytest.mark.parametrize("m, n, conds", [(64, 64, []), (100, 64, ["cube_m0 + r < M"]),
                                         (64, 100, ["cube_n0 + c < N"]),
                                         (100, 100, ["cube_m0 + r < M", "cube_n0 + c < N"])])
def test_stores_check_bounds_only_where_the_problem_does_not_divide(m, n, conds):
    level, cfg = _setup(m, n)
    assert level.bounds(cfg, SCOPE, "r", "c") == conds
    text = level.store(cfg, D, SCOPE, "r", "c", "acc[0]")
    assert "C[(cube_m0 + r) * ldc + cube_n0 + c] = acc[0];" in text
    assert text.startswith(f"if ({' && '.join(conds)}) ") == bool(conds)
    assert level.guarded(cfg, SCOPE, "r", "c", "s;") == (f"if ({' && '.join(conds)}) s;" if conds else "s;")


def test_a_dense_level_refuses_quantized_weights_and_names_the_loader():
    level, _ = _setup()
    dense = MatmulProblem(1, 64, 64, 64, FLOAT32, FLOAT32, FLOAT32)
    level.check_weights(dense)
    assert not level.reads_weights()
    quantized = dataclasses.replace(dense, weights=WeightFormat("int4", group_size=32))
    with pytest.raises(SetupError, match="int4 weights need a dequantizing loader") as info:
        level.check_weights(quantized)
    assert "rhs loader" in info.value.component


def test_shared_ring_and_staging_are_none_by_default_and_frozen_values():
    level, cfg = _setup()
    assert level.shared_ring(cfg, D) is None and level.store_staging(cfg, D) is None
    ring = SharedRing("p", 1024, ("wait();",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ring.bytes = 0
    assert StoreStaging("a", "p", 2048, "sync();", "UNIT_ID == 0", "UNIT_ID", 256).bytes == 2048


# -- the stage config's own loader requirements (setup_stage): swizzled rows need swizzling loaders
F16_PROBLEM = MatmulProblem(1, 512, 512, 512, FLOAT16, FLOAT16, FLOAT16, Layout.ROW, Layout.ROW, 8, 8)


class PlainChunkLoader(ChunkLoader):
    """A chunk loader that does not say it writes swizzled rows."""

    provides = ChunkLoader.provides - {XOR_SWIZZLED_SMEM}


class PlainRing(PipelinedMmaAlgorithm):
    name = "plain_ring"
    lhs_loader = PlainChunkLoader


def test_swizzling_stage_with_loaders_that_do_not_swizzle_is_refused():
    with pytest.raises(SetupError, match=r"simple_global: stage PlanePartitionedStage .* needs .*16-byte chunks "
                                         r"XOR-swizzled .* from its lhs loader \(smem_swizzle=True.*which CyclicLoader"):
        SimpleMmaAlgorithm(smem_swizzle=True).setup(F16_PROBLEM, D)
    with pytest.raises(SetupError, match=r"pipelined_global: .* from its lhs loader .* which PlainChunkLoader .* does not provide"):
        PlainRing(smem_swizzle=True, stages=3).setup(F16_PROBLEM, D)
    # Unswizzled, both compose as before; the chunk loader writes swizzled rows when asked.
    SimpleMmaAlgorithm().setup(F16_PROBLEM, D)
    PlainRing(stages=3).setup(F16_PROBLEM, D)
    cfg = PipelinedMmaAlgorithm(smem_swizzle=True, stages=3).setup(F16_PROBLEM, D).batch.global_
    assert cfg.lhs_loader.operand.swizzle == cfg.stage.lhs_swizzle is not None
    assert cfg.rhs_loader.operand.swizzle == cfg.stage.rhs_swizzle is not None
