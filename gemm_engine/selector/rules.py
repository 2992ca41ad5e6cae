"""The selection rules, in one place: which registered algorithm ``auto`` takes, when, and why.

`RULES` is ordered: ``auto`` takes the first rule whose condition holds for the problem and whose
algorithm sets up. Two different things can pass a rule by:

* *should not be chosen*: the rule's ``when`` returns a reason (skinny_split_k on an output too
  short to be worth a second launch): the algorithm could run, auto prefers what comes after;
* *cannot run*: its setup raises `SetupError` (wgmma on a device without it).

`UNRANKED` names every other built-in algorithm with the reason auto never takes it (and whether
the tuner times it anyway); the card's family names are families.py's. From these tables derive
``auto`` (algorithms/auto.py), the explanation of a choice (explain.py), the tuner's candidates
(tuning/space.py) and the tests' expectations; nothing else keeps a list of names. The conditions
are conditions.py's; the measurements behind the order: bench/SELECTION_NOTES.md, "Rule order".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..codegen.dialect import Dialect
from ..problem import MatmulProblem
from .cpu import cpu_path
from .conditions import (always, dequantize_first_worth_it, dequantized_specialized_worth_it,  # noqa: F401
                         quantized, quantized_decode_split_worth_it, quantized_decode_worth_it,
                         quantized_wgmma_split_worth_it, quantized_wgmma_worth_it,
                         skinny_split_worth_it, skinny_worth_it, specialized_worth_it, split_k_worth_it,
                         transposed_weights,
                         wgmma_worth_it, without_cp_async)


@dataclass(frozen=True)
class Rule:
    """Take ``algorithm`` (a registered name) when ``when`` returns None; ``why`` says why it sits
    where it does in the order (explain quotes it)."""

    algorithm: str
    why: str
    when: Callable[[MatmulProblem, Dialect], str | None] = field(default=always, compare=False)
    #: The tuner times it (a family: each member), whatever ``when`` says.
    tune: bool = True


@dataclass(frozen=True)
class Unranked:
    """A registered built-in ``auto`` never takes, and why; ``tune``: the tuner times it anyway."""

    algorithm: str
    why: str
    tune: bool = False


# -- the tables ---------------------------------------------------------------------------------------
RULES: tuple[Rule, ...] = (
    Rule("skinny_split_k", "first: M = 1 or N = 1 with a big operand (16 MiB up) contiguous along the "
                           "outputs: K split over a wave of cubes, each reading long runs of rows "
                           "(bf16 1x8192x8192: 0.051 ms against 0.053 in one launch); not one row of a "
                           "16-bit weight on Hopper (the decode tiles)", skinny_split_worth_it),
    Rule("skinny", "for M = 1 or N = 1 a bandwidth kernel beats any tiled one (one tile row used) but the Hopper "
                   "decode tiles on big 16-bit weights; for 2 to 8 rows streaming a big operand on CUDA, each "
                   "element read once for every row (predicted)", skinny_worth_it),
    Rule("split_k", "before the tiled kernels: with a long K against a small output, the output tiles "
                    "alone leave compute units idle (64x64x65536 f32: 99x unsplit)", split_k_worth_it),
    Rule("specialized_wgmma", "the Hopper warp-specialized TMA kernel with TMA stores, ahead of "
                              "pipelined_wgmma from a third of a wave of tiles or, 16-bit and fp8 "
                              "(int8 with K >= 8 max(M, N)), 2^32 operations (bf16 4096^3: 0.94x "
                              "cuBLAS against 0.81; relu(a@b+bias) 8192 x 8192 x 64: 2.0x torch "
                              "against 1.6), "
                              "operands TMA cannot address or the tile cannot read copied first (f16 "
                              "4093^3: 2.5x cuBLAS); a small problem passes it by unless its 64 x 128 "
                              "tiles fill a wave (f16 1000^3: 8.2 us against 11.8 on an H200); weight-streaming "
                              "products (a short side up to 128 against 8 MiB up) with every tile split "
                              "along K over the device (predicted)", specialized_worth_it),
    Rule("pipelined_wgmma", "the fastest tensor-core kernel on Hopper (f16 4096^3: 0.85x cuBLAS, against "
                            "0.40-0.45 for mma.sync; tf32 4096^3: 0.80x with its transposing pass, "
                            "against 0.36; the pass only from M, N >= 768)", wgmma_worth_it),
    Rule("pipelined_mma", "tensor cores with a cp.async ring on sm_80+ (behind wgmma where wgmma runs), and "
                          "on NVIDIA's OpenCL driver where the probe finds mma.sync and cp.async"),
    Rule("pipelined_dmma", "float64 tensor cores on sm_80+ (m16n8k8 on sm_90: 0.9x cuBLAS, 4.8x register FMA on the H100)"),
    Rule("double_buffering_mma", "tensor cores without the cp.async ring, where there is no ring: an OpenCL "
                                 "driver whose probe found mma.sync but refused cp.async", without_cp_async),
    Rule("simple_dmma", "float64 tensor cores without the cp.async ring, where there is no ring (as above)",
         without_cp_async),
    Rule("direct_vector", "the CPU path: vector register tiles reading the operands in place, no shared "
                          "memory and no barrier: on PoCL several times simple_unit and ordered_unit (SELECTION_NOTES.md, CPU path)",
         cpu_path),
    Rule("simple_unit", "register FMA, every backend and dtype: the fallback (f32 4096^3: 0.89x cuBLAS, "
                        "ahead of double_buffering_unit's 0.81)"),
    # Quantized weights (gemm_engine/quant): every rule above refuses them (check_weights), each below
    # refuses a dense rhs; last, so that a dense problem's choice never looks at them.
    Rule("quantized_wgmma_split_k", "quantized weights from 48 to 512 rows on Hopper where the tiles leave "
                                    "half the multiprocessors idle over a long K (>= 8192): the weights "
                                    "dequantized into wgmma's register operand, K cut into 4 ranges", quantized_wgmma_split_worth_it),
    Rule("quantized_wgmma", "quantized weights from 48 to 512 rows on Hopper: the weights dequantized into "
                            "wgmma's register operand, each value converted once a cube of up to 256 rows "
                            "(int4 14336 x 4096 M = 256: 58.0 us against the pass's 114)", quantized_wgmma_worth_it),
    Rule("quantized_decode_split_k", "quantized weights at decode sizes (M <= 64) where one launch of "
                                     "quantized_decode's cubes leaves multiprocessors idle: the weights "
                                     "streamed once, K cut over more cubes so that every multiprocessor "
                                     "streams", quantized_decode_split_worth_it),
    Rule("quantized_decode", "quantized weights at decode sizes (M <= 64): the weights streamed once, "
                             "dequantized in registers into tensor-core fragments", quantized_decode_worth_it),
    Rule("dequantized_specialized_wgmma", "quantized weights past decode sizes on Hopper: the weight "
                                          "expanded once per call into a K-major copy, then the specialized "
                                          "kernel (predicted int4 4096 x 4096: M = 256 0.55x cuBLAS bf16, "
                                          "M = 4096 0.9x; the loader path ran 0.08-0.10x)",
         dequantized_specialized_worth_it),
    Rule("dequantized_pipelined_wgmma", "the same pass before pipelined_wgmma where specialized_wgmma "
                                        "passes a small dense product by", dequantize_first_worth_it),
    Rule("dequantized_pipelined_mma", "the same pass before pipelined_mma (sm_80+, before Hopper)",
         dequantize_first_worth_it),
    Rule("quantized_double_buffering_mma", "quantized weights (gemm_engine/quant) on tensor cores: the "
                                           "dequantizing loader feeds mma.sync tiles (CUDA sm_80+, 16-bit "
                                           "activations)", quantized),
    Rule("quantized_simple_unit", "quantized weights by register FMA: every backend and activation type, "
                                  "the fallback of quantized problems", quantized),
    Rule("dequantized_simple_unit", "a transposed quantized weight (W.T, a backward's gy @ W^T) where no "
                                    "tensor-core pass runs: the dequantizing pass, then register FMA; every "
                                    "backend", transposed_weights),
)

UNRANKED: tuple[Unranked, ...] = (
    Unranked("quantized_simple_mma", "quantized weights on mma.sync without double buffering: "
                                     "quantized_double_buffering_mma spreads its loads between tile matmuls"),
    Unranked("double_buffering_unit", "measured behind simple_unit (f32 4096^3 on the H100: 0.81 vs "
                                      "0.89x cuBLAS)", tune=True),
    Unranked("simple_mma", "tensor cores without the cp.async ring: pipelined_mma / pipelined_wgmma are faster"),
    Unranked("simple_wmma", "the WMMA API's fragments: pipelined_mma's mma.sync with ldmatrix is faster"),
    *(Unranked(name, "AMD / Intel matrix cores from OpenCL: compiled offline only, never run on the hardware; "
                     "auto takes them once a run there checks them") for name in
      ("simple_mfma", "double_buffering_mfma", "simple_wmma_gfx11", "simple_dpas", "double_buffering_dpas")),
    Unranked("quantized_specialized_wgmma", "quantized weights converted in shared memory by the Hopper kernel's "
                                            "producer warpgroup: 0.84-1.11x the current choices' speed on the H100 "
                                            "(bench/SELECTION_NOTES.md, \"Converted in shared memory\")", tune=True),
    Unranked("ordered_unit", "a composition of the algorithm family, slower than simple_unit in the H100 sweeps"),
    Unranked("specialized_unit", "a composition of the algorithm family, slower than simple_unit in the H100 sweeps"),
    # Grouped problems only (grouped_matmul): every dense problem is refused by their batch level.
    *(Unranked(name, "grouped problems only: grouped_matmul runs the grouped family (algorithms/grouped.py)")
      for name in ("grouped", "grouped_specialized_wgmma", "grouped_pipelined_wgmma", "grouped_pipelined_mma",
                   "grouped_simple_unit", "grouped_quantized_decode", "grouped_quantized_wgmma",
                   "grouped_quantized_double_buffering_mma", "grouped_quantized_simple_unit")),
)

#: Registered families (families.py's and a user's): each runs its best member that sets up; the
#: members are listed on their own.
FAMILY_NOTE = "a family (its members are listed on their own)"


def rule_for(name: str) -> Rule | None:
    return next((r for r in RULES if r.algorithm == name), None)


def unranked_reason(name: str) -> str:
    found = next((u for u in UNRANKED if u.algorithm == name), None)
    return found.why if found else "not one of auto's rules: run only when named"
