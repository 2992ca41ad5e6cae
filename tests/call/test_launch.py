"""call/launch.py: a call plan's per-call values. A fused call's epilogue values are the epilogue's
parameters only: the scratch the launcher adds (a fresh workspace, the split tail's kept scratch)
is not one of them (a decode batch with a bias or fp8 row scales, split tail on, raised
KeyError: 'kept_scratch' on its repeated call: bench/results/h100/shape_probe_decode.md's fp8 row)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import get_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.base import KEPT_SCRATCH
from gemm_engine.call.launch import CallPlan
from gemm_engine.call.plan import Plan
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.signature import ARRAY, Packer
from gemm_engine.dtypes import BFLOAT16
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def test_fused_values_leave_the_kept_scratch_to_the_launcher():
    p = MatmulProblem(1, 16, 4096, 4096, BFLOAT16, BFLOAT16, BFLOAT16, Layout.ROW, Layout.COL, 8, 8,
                      epilogue=Epilogue(bias=BFLOAT16))
    alg = SpecializedWgmmaAlgorithm(split_tail=4)
    cfg = alg.setup(p, SM90)
    concrete = alg.chosen(cfg)
    sig = concrete.signature(cfg)
    plan = Plan(concrete, cfg, "", sig, (), concrete.workspace(cfg, p), concrete.call_values(cfg, p),
                concrete.kept_workspace(cfg, p))
    assert plan.kept is not None and KEPT_SCRATCH in [q.name for q in sig.params]
    per_call = {"lhs_base", "lhs_offset", "rhs_base", "rhs_offset", "out_base", "out_offset", "bias_base",
                "bias_offset"} | set(plan.call_values.names) | {KEPT_SCRATCH}
    fixed = {q.name: 0 for q in sig.params if q.name not in per_call and q.kind != ARRAY}
    call = CallPlan(plan, Packer(sig, fixed), (16, 4096), np.dtype("float32"), fused=True)
    assert call.fused_names == ("bias_base", "bias_offset")


@pytest.mark.cuda
def test_repeated_fused_decode_call_with_a_split_tail():
    """A bias on a 16 x 4096 x 4096 bf16 decode product whose tiles are split along K (a kept
    scratch): the repeated call (fast path) runs and is right."""
    torch = pytest.importorskip("torch")
    engine = get_engine("cuda")
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(16, 4096, device="cuda", generator=gen).to(torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", generator=gen).to(torch.bfloat16)
    bias = torch.randn(4096, device="cuda", generator=gen).to(torch.bfloat16)
    alg = SpecializedWgmmaAlgorithm(split_tail=4)
    want = x.double() @ w.double().T + bias.double()
    for _ in range(3):
        got = engine.matmul(x, w.T, bias=bias, algorithm=alg)
        assert engine.last_choice[1].batch.global_.split_tail > 1
        err = float((got.double() - want).norm() / want.norm())
        assert err < 1e-2, err
