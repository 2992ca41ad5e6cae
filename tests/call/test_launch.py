"""call/launch.py: call plans, what a repeated call sets per call, and nothing else. A fused call's
epilogue values are the epilogue's parameters only: the scratch the launcher adds (a fresh
workspace, the split tail's kept scratch) is not one of them (a decode batch with a bias or fp8 row
scales, split tail on, raised KeyError: 'kept_scratch' on its repeated call on the H100:
bench/results/h100/shape_probe_decode.md's fp8 row)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import get_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch.base import KEPT_SCRATCH
from gemm_engine.call.arguments import ArrayArgument, CallArguments, EpilogueInputs
from gemm_engine.call.launch import CallPlan
from gemm_engine.call.plan import Plan
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.signature import ARRAY, KernelSignature, Packer, Param, array, index, operand_params
from gemm_engine.dtypes import BFLOAT16
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))


def test_a_fused_call_plan_sets_only_the_epilogues_values_per_call():
    # A plan with kept scratch (a split tail's) and a bias: the prepared launch refills the addresses
    # and the epilogue's values; the kept scratch is the launch's own (it must not be asked of the
    # caller's inputs: a KeyError on the H100 before).
    signature = KernelSignature((*operand_params("lhs", "bf16_bits"), *operand_params("rhs", "bf16_bits"),
                                 *operand_params("out", "bf16_bits", True), *index("M", "N", "K", "batch"),
                                 Param("alpha", "scalar", "f32"), array("bias_base", "bf16_bits"),
                                 *index("bias_offset", "bias_stride"), array(KEPT_SCRATCH, "f32", True)))
    plan = SimpleNamespace(signature=signature, call_values=None, workspace=None, kept=object())
    args = CallArguments(ArrayArgument("A", (("ld", 8), ("batch_stride", 0))),
                         ArrayArgument("B", (("ld", 8), ("batch_stride", 0))),
                         ArrayArgument("O", (("ld", 8), ("batch_stride", 0))), 8, 8, 8, 1, alpha=2.0,
                         bias=ArrayArgument("BIAS", (("stride", 1),)), fused=True)
    values = args.values(lambda x: (x, 0))
    call = CallPlan.make(plan, values, args.per_call_names(), (8, 8), None, True)
    assert call.fused_names == ("alpha", "bias_base", "bias_offset")
    inputs = EpilogueInputs(3.0, None, None, "NEWBIAS", None, None, None)
    assert call.fused_values(inputs, lambda x: (x, 0)) == [3.0, "NEWBIAS", 0]


def test_fused_values_of_a_split_tail_plan_leave_the_kept_scratch_to_the_launcher():
    """The same on specialized_wgmma's own signature (a decode product split in 4, with a bias),
    even where the kept scratch is named among the changing values."""
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
    call = CallPlan(plan, Packer(sig, fixed), (16, 4096), np.dtype("float32"), fused=True,
                    per_call=frozenset(per_call))
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
