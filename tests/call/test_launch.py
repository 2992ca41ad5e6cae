"""Call plans: what a repeated call sets per call, and nothing else."""
from __future__ import annotations

from types import SimpleNamespace

from gemm_engine.batch.base import KEPT_SCRATCH
from gemm_engine.call.arguments import ArrayArgument, CallArguments, EpilogueInputs
from gemm_engine.call.launch import CallPlan
from gemm_engine.codegen.signature import KernelSignature, Param, array, index, operand_params


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
