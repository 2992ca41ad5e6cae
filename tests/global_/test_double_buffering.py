"""global_/double_buffering.py: two stages per operand (twice the simple level's shared memory),
one barrier per K step, the next slice's loads spread between tile executions by its listener, and
its kernels on PoCL against float64 with K spanning one, two and many stages."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.batch.base import CubeScope, OperandRef
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT32
from gemm_engine.global_.double_buffering import DoubleBufferingGlobalMatmul
from gemm_engine.global_.listeners import DoubleBufferingListener
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, random

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
PROBLEM = MatmulProblem(1, 128, 128, 64, FLOAT32, FLOAT32, FLOAT32)
DB = REGISTRY["double_buffering_unit"]


def test_two_stages_per_operand():
    simple = SimpleUnitAlgorithm().setup(PROBLEM, CL)
    double = DB().setup(PROBLEM, CL)
    assert DoubleBufferingGlobalMatmul.buffers == 2
    assert double.batch.global_.stage == simple.batch.global_.stage
    text = DoubleBufferingGlobalMatmul().shared_declarations(double.batch.global_, CL)
    assert f"[{2 * double.batch.global_.stage.lhs_smem_elems}]" in text


def test_one_barrier_per_k_step_and_the_next_slice_loaded_inside_it():
    alg = DB()
    cfg = alg.setup(PROBLEM, CL).batch.global_
    level = alg.build().global_
    assert level.listener_class is DoubleBufferingListener
    scope = CubeScope(OperandRef("lhs", "lhs_ld"), OperandRef("rhs", "rhs_ld"), OperandRef("out", "out_ld"))
    body = level.body(cfg, CL, scope)
    loop = body[body.index("for (i64 k0"):body.index("cur ^= 1;")]
    assert loop.count("SYNC_CUBE()") == 1
    sk = cfg.stage.stage_k
    nxt = f"(lhs_smem + (cur ^ 1) * {cfg.stage.lhs_smem_elems})"
    guard = f"if (k0 + {sk} < K)"
    assert guard in loop and loop.index(guard) < loop.index("SYNC_CUBE()")
    assert nxt in loop or nxt.replace(" ", "") in loop.replace(" ", "")
    # The simple level pays two barriers per step.
    simple = SimpleUnitAlgorithm()
    sbody = simple.build().global_.body(simple.setup(PROBLEM, CL).batch.global_, CL, scope)
    assert sbody[sbody.index("for (i64 k0"):].count("SYNC_CUBE()") == 2


@pytest.mark.parametrize("k", [1, 16, 17, 48, 100])
def test_on_pocl(opencl_engine, rng, k):
    a, b = random(rng, (70, k), "float32"), random(rng, (k, 66), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm="double_buffering_unit"), a, b, "float32")
